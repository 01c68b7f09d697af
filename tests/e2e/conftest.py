"""End-to-end fixtures: a real `fp4serve serve` process on the built-in demo model (random weights,
real Qwen tokenizer and chat template), driven over HTTP by the official `openai` client and raw
requests. Each server gets its own port and its own model cache directory under pytest's tmp.
A server may listen over TLS (`verify=CA file`, `client_cert=(cert, key)` when it asks for one) or on
a Unix socket (`uds=path`): Server.get() reaches /health whichever it is."""
import os
import resource
import shutil
import signal
import socket
import subprocess
import tarfile
import time
from pathlib import Path

import pytest
import requests

ROOT = Path(__file__).resolve().parents[2]
BINARY = Path(os.environ.get("FP4SERVE_BINARY", ROOT / "build" / "fp4serve"))
CANARY_DIR = ROOT / "tests" / "data" / "models" / "canary"
# The real Qwen tokenizer (scripts/setup.sh installs it); on the GPU machine scripts/gpu-check.sh points
# FP4SERVE_TOKENIZER_DIR at the copy it carries.
TOKENIZER_DIR = Path(os.environ.get("FP4SERVE_TOKENIZER_DIR", ROOT / ".cache" / "tokenizers" / "qwen3.5"))
# Where the device-parametrized tests (test_device_parity.py, test_canary_model.py) run the model: the CPU
# in CI, FP4SERVE_TEST_DEVICE=cuda on a GPU machine (scripts/gpu-check.sh): the same test bodies on both.
TEST_DEVICE = os.environ.get("FP4SERVE_TEST_DEVICE", "cpu")
CHAT_TEMPLATE = ROOT / "tests" / "data" / "chat_templates" / "qwen3.6.jinja"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, args, cache_dir, env=None, nofile=None, verify=None, client_cert=None, uds=None):
        self.port = free_port()
        self.verify = verify
        self.client_cert = client_cert
        self.uds = uds
        self.url = f"{'https' if verify else 'http'}://127.0.0.1:{self.port}"
        self.log_path = Path(cache_dir) / f"serve-{self.port}.log"
        full_env = dict(os.environ, FP4SERVE_CACHE=str(cache_dir), OMP_WAIT_POLICY="passive",
                        VLLM_LOG_STATS_INTERVAL="1")
        full_env.update(env or {})
        self.log = open(self.log_path, "w")
        # nofile: the server's descriptor limit (soft = hard, so it cannot raise it), for exhaustion tests.
        limit = (lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))) if nofile else None
        self.proc = subprocess.Popen(
            [str(BINARY), "serve", "--host", "127.0.0.1", "--port", str(self.port),
             "--kv-cache-memory", "256MiB", "--max-model-len", "2048", "--threads", "1",
             *(["--uds", uds] if uds else []), *args],
            stdout=self.log, stderr=subprocess.STDOUT, env=full_env, preexec_fn=limit)
        deadline = time.time() + 120
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"fp4serve serve exited with {self.proc.returncode}:\n{self.read_log()}")
            try:
                if self.get("/health", timeout=1).status_code == 200:
                    return
            except (requests.RequestException, OSError):
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"fp4serve serve did not become healthy:\n{self.read_log()}")

    def get(self, path, **kwargs):
        """GET over whatever the server listens on: TCP, TLS (verified against `verify`) or its
        Unix socket."""
        if self.uds:
            import httpx
            with httpx.Client(transport=httpx.HTTPTransport(uds=self.uds)) as c:
                try:
                    return c.get("http://localhost" + path, **kwargs)
                except httpx.HTTPError as e:
                    raise OSError(str(e)) from e
        return requests.get(self.url + path, verify=self.verify or True, cert=self.client_cert, **kwargs)

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
def tokenizer_dir():
    """The real Qwen tokenizer's directory (TOKENIZER_DIR)."""
    return TOKENIZER_DIR


@pytest.fixture(scope="session")
def test_device():
    """The --device of the device-parametrized tests. With FP4SERVE_TEST_DEVICE=cuda a binary or a
    machine without a usable CUDA device fails the run: a GPU run that silently fell back to the CPU
    would pass for the wrong reason."""
    if TEST_DEVICE not in ("cpu", "cuda"):
        pytest.fail(f"FP4SERVE_TEST_DEVICE={TEST_DEVICE}: use cpu or cuda")
    if TEST_DEVICE == "cuda":
        r = subprocess.run([str(BINARY), "doctor"], capture_output=True, text=True, timeout=120)
        if "CUDA devices: none usable" in r.stdout or "CUDA device 0:" not in r.stdout:
            pytest.fail("FP4SERVE_TEST_DEVICE=cuda but no CUDA device answers:\n" + r.stdout + r.stderr)
    return TEST_DEVICE


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("fp4serve-cache")


@pytest.fixture(scope="session")
def make_server(cache_dir):
    servers = []

    def make(*args, env=None, nofile=None, **transport):
        s = Server(list(args), cache_dir, env, nofile, **transport)
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


@pytest.fixture(scope="session")
def canary_model_dir(tmp_path_factory):
    """canary_model_dir(fmt): a directory holding the trained canary model (tests/data/models/canary,
    "bf16" or "nvfp4") with the real tokenizer and the Qwen3.6 chat template, extracted once per
    format and session."""
    made = {}

    def make(fmt="bf16"):
        if fmt not in made:
            model = tmp_path_factory.mktemp(f"canary-{fmt}")
            with tarfile.open(CANARY_DIR / f"canary-{fmt}.tar.xz") as tar:
                tar.extractall(model, filter="data")
            for name in ("tokenizer.json", "tokenizer_config.json"):
                shutil.copy(TOKENIZER_DIR / name, model / name)
            shutil.copy(CHAT_TEMPLATE, model / "chat_template.jinja")
            made[fmt] = model
        return made[fmt]

    return make
