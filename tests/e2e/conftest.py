"""End-to-end fixtures: a real `fp4serve serve` process on the built-in demo model (random weights,
real Qwen tokenizer and chat template), driven over HTTP by the official `openai` client and raw
requests. Each server gets its own port and its own model cache directory under pytest's tmp."""
import os
import resource
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
import requests

ROOT = Path(__file__).resolve().parents[2]
BINARY = Path(os.environ.get("FP4SERVE_BINARY", ROOT / "build" / "fp4serve"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, args, cache_dir, env=None, nofile=None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = Path(cache_dir) / f"serve-{self.port}.log"
        full_env = dict(os.environ, FP4SERVE_CACHE=str(cache_dir), OMP_WAIT_POLICY="passive",
                        VLLM_LOG_STATS_INTERVAL="1")
        full_env.update(env or {})
        self.log = open(self.log_path, "w")
        # nofile: the server's descriptor limit (soft = hard, so it cannot raise it), for exhaustion tests.
        limit = (lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))) if nofile else None
        self.proc = subprocess.Popen(
            [str(BINARY), "serve", "--host", "127.0.0.1", "--port", str(self.port),
             "--kv-cache-memory", "256MiB", "--max-model-len", "2048", "--threads", "1", *args],
            stdout=self.log, stderr=subprocess.STDOUT, env=full_env, preexec_fn=limit)
        deadline = time.time() + 120
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"fp4serve serve exited with {self.proc.returncode}:\n{self.read_log()}")
            try:
                if requests.get(self.url + "/health", timeout=1).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"fp4serve serve did not become healthy:\n{self.read_log()}")

    def read_log(self) -> str:
        self.log.flush()
        return self.log_path.read_text()

    def stop(self, sig=signal.SIGTERM, timeout=30) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode


@pytest.fixture(scope="session")
def fp4serve_binary():
    """The fp4serve executable the servers run (tests import nothing from conftest: pytest may load
    another suite's conftest module under the same name)."""
    return BINARY


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("fp4serve-cache")


@pytest.fixture(scope="session")
def make_server(cache_dir):
    servers = []

    def make(*args, env=None, nofile=None):
        s = Server(list(args), cache_dir, env, nofile)
        servers.append(s)
        return s

    yield make
    for s in servers:
        s.stop()


@pytest.fixture(scope="session")
def server(make_server):
    """The default server: reasoning parser and tool calling on, debug switches on."""
    return make_server("--reasoning-parser", "qwen3", "--enable-auto-tool-choice", "--tool-call-parser",
                       "qwen3_coder", "--enable-debug-endpoints", "--health-stall-timeout", "1")


@pytest.fixture()
def client(server):
    import openai
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused")
