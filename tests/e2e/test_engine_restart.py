"""The engine in its own process (serve's default, as vLLM V1's EngineCore): when it is SIGKILLed,
crashes (SIGSEGV) or wedges past --health-stall-timeout, the front-end restarts it and resumes every
in-flight request with the tokens already sent. Every stream completes with no error, its greedy text
equals an undisturbed run's, its usage counts are right, and the restart shows on /metrics. A
request the server never accepted is not replayed; one its client cancelled is not resurrected.
On the trained canary model (tests/data/models/canary), through the official openai client."""
import os
import re
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest
import requests

MODEL = "canary"
MAX_TOKENS = 40


@pytest.fixture(scope="module")
def restart_server(make_server, canary_model_dir):
    return make_server("--model", str(canary_model_dir("bf16")), "--served-model-name", MODEL,
                       "--enable-debug-endpoints", "--health-stall-timeout", "3", "--max-num-seqs", "64",
                       "--max-engine-restarts", "10")


def client_for(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=120)


def prompt(i):
    return f"Request {i}: tell me a story about the number {i * 7919 % 1000}."


def metric(server, name):
    for line in requests.get(server.url + "/metrics", timeout=10).text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not on /metrics")


def engine_pid(server):
    return requests.get(server.url + "/debug/engine", timeout=10).json()["pid"]


class Stream:
    """One streaming greedy completion, read on its own thread: text, chunk count, usage."""

    def __init__(self, client, i, max_tokens=MAX_TOKENS):
        self.text, self.chunks, self.usage, self.finish, self.error = "", 0, None, None, None
        self.thread = threading.Thread(target=self.run, args=(client, i, max_tokens))
        self.thread.start()

    def run(self, client, i, max_tokens):
        try:
            for chunk in client.completions.create(model=MODEL, prompt=prompt(i), max_tokens=max_tokens, temperature=0,
                                                   stream=True, stream_options={"include_usage": True},
                                                   extra_body={"ignore_eos": True}):
                if chunk.choices:
                    self.text += chunk.choices[0].text
                    self.finish = chunk.choices[0].finish_reason or self.finish
                    self.chunks += 1
                if chunk.usage:
                    self.usage = chunk.usage
        except Exception as e:  # noqa: BLE001 -- the assertion names it
            self.error = e

    def join(self):
        self.thread.join(120)
        assert not self.thread.is_alive(), "stream did not finish"


@pytest.fixture(scope="module")
def undisturbed(restart_server):
    """The reference: each prompt's greedy text and usage without any fault."""
    c = client_for(restart_server)
    def one(i):
        r = c.completions.create(model=MODEL, prompt=prompt(i), max_tokens=MAX_TOKENS, temperature=0,
                                 extra_body={"ignore_eos": True})
        return r.choices[0].text, r.usage
    with ThreadPoolExecutor(16) as pool:
        return list(pool.map(one, range(50)))


def wait_for(predicate, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


def run_with_fault(server, undisturbed, count, fault):
    """`count` concurrent streams; `fault()` once each has had some output; then every stream must
    complete as if nothing happened."""
    restarts = metric(server, "fp4serve:engine_restarts_total")
    pid = engine_pid(server)
    c = client_for(server)
    streams = [Stream(c, i) for i in range(count)]
    assert wait_for(lambda: all(s.chunks >= 2 for s in streams) or any(s.finish for s in streams)), \
        "the streams did not start"
    assert not any(s.finish for s in streams), "a stream finished before the fault: raise MAX_TOKENS"
    fault(pid)
    for s in streams:
        s.join()
    for i, s in enumerate(streams):
        assert s.error is None, f"stream {i}: {s.error!r}\n{server.read_log()[-3000:]}"
        text, usage = undisturbed[i]
        assert s.text == text, f"stream {i} differs from the undisturbed run"
        assert s.finish == "length"
        assert s.usage.completion_tokens == MAX_TOKENS == usage.completion_tokens
        assert s.usage.prompt_tokens == usage.prompt_tokens
    assert metric(server, "fp4serve:engine_restarts_total") == restarts + 1
    assert engine_pid(server) != pid
    assert requests.get(server.url + "/health", timeout=10).status_code == 200


def test_sigkill_mid_stream_resumes_all_50_streams(restart_server, undisturbed):
    run_with_fault(restart_server, undisturbed, 50, lambda pid: os.kill(pid, signal.SIGKILL))
    log = restart_server.read_log()
    assert "killed by signal 9" in log
    m = re.findall(r"Streams resumed: first output (\d+) ms after the engine process died", log)
    assert m, log[-3000:]
    print(f"death to resumed streams: {m[-1]} ms")


def test_segfault_mid_stream_resumes_the_streams(restart_server, undisturbed):
    def segfault(pid):
        assert requests.post(restart_server.url + "/debug/segfault", timeout=10).status_code == 200
    run_with_fault(restart_server, undisturbed, 8, segfault)
    assert "killed by signal 11" in restart_server.read_log()


def test_wedged_engine_is_killed_and_the_streams_resume(restart_server, undisturbed):
    def wedge(pid):
        assert requests.post(restart_server.url + "/debug/stall?on=1", timeout=10).status_code == 200
        # /health says so while the engine is wedged or restarting.
        assert wait_for(lambda: requests.get(restart_server.url + "/health", timeout=10).status_code == 503, 10)
    run_with_fault(restart_server, undisturbed, 8, wedge)
    assert "wedged" in restart_server.read_log()


def test_cancelled_and_refused_requests_are_not_replayed(restart_server, undisturbed):
    c = client_for(restart_server)
    live = Stream(c, 0, max_tokens=300)
    # Cancelled by its client after a few chunks: long, so that it would still run if resurrected.
    cancelled = c.completions.create(model=MODEL, prompt=prompt(1), max_tokens=1500, temperature=0, stream=True,
                                     extra_body={"ignore_eos": True})
    for n, _ in enumerate(cancelled):
        if n == 2:
            break
    cancelled.close()
    # Never accepted: refused with 400 before it reaches the engine.
    with pytest.raises(openai.BadRequestError):
        c.completions.create(model=MODEL, prompt=prompt(2), max_tokens=100000)
    assert wait_for(lambda: live.chunks >= 2)
    assert wait_for(lambda: metric(restart_server, "vllm:num_requests_running") <= 1, 10)
    os.kill(engine_pid(restart_server), signal.SIGKILL)
    live.join()
    reference = c.completions.create(model=MODEL, prompt=prompt(0), max_tokens=300, temperature=0,
                                     extra_body={"ignore_eos": True})
    assert live.error is None and live.text == reference.choices[0].text
    assert live.usage.completion_tokens == 300
    resumed = re.findall(r"(\d+) in-flight requests resumed", restart_server.read_log())
    assert resumed[-1] == "1", "only the live stream is resubmitted"
    assert metric(restart_server, "vllm:num_requests_running") == 0
    assert metric(restart_server, "vllm:num_requests_waiting") == 0


def test_during_a_restart_health_is_503_and_new_requests_wait(restart_server, undisturbed):
    c = client_for(restart_server)
    restarts = metric(restart_server, "fp4serve:engine_restarts_total")
    os.kill(engine_pid(restart_server), signal.SIGKILL)
    assert wait_for(lambda: requests.get(restart_server.url + "/health", timeout=10).status_code == 503, 5)
    assert "restarting" in requests.get(restart_server.url + "/health", timeout=10).json()["error"]["message"]
    # Sent while no engine runs: it waits for the new one instead of failing.
    r = c.completions.create(model=MODEL, prompt=prompt(3), max_tokens=MAX_TOKENS, temperature=0,
                             extra_body={"ignore_eos": True})
    assert r.choices[0].text == undisturbed[3][0]
    assert metric(restart_server, "fp4serve:engine_restarts_total") == restarts + 1
    assert requests.get(restart_server.url + "/health", timeout=10).status_code == 200
