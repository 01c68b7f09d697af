"""Concurrency, cancellation, overload, the wedge watchdog and draining, on a real server."""
import json
import signal
import socket
import threading
import time

import requests

MODEL = "fp4serve-demo"


def stream_completion(url, max_tokens, prompt="Hi"):
    """(token chunks, usage.completion_tokens) of one streamed completion."""
    body = {"model": MODEL, "prompt": prompt, "max_tokens": max_tokens, "stream": True,
            "stream_options": {"include_usage": True}, "ignore_eos": True}
    chunks, usage, done = 0, None, False
    with requests.post(url + "/v1/completions", json=body, stream=True, timeout=300) as r:
        assert r.status_code == 200, r.text
        for line in r.iter_lines():
            if not line:
                continue
            payload = line.decode()[len("data: "):]
            if payload == "[DONE]":
                done = True
                break
            event = json.loads(payload)
            if event.get("choices"):
                chunks += 1
            if event.get("usage"):
                usage = event["usage"]["completion_tokens"]
    assert done
    return chunks, usage


def metric(server, name):
    for line in requests.get(server.url + "/metrics", timeout=10).text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    raise KeyError(name)


def test_256_simultaneous_streams_all_complete_with_matching_usage(server):
    results = [None] * 256
    errors = []

    def run(i):
        try:
            results[i] = stream_completion(server.url, 4 + i % 13, prompt=f"Request {i}:")
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(256)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not errors, errors[:3]
    for i, (chunks, usage) in enumerate(results):
        assert usage == 4 + i % 13
        assert chunks == usage


def test_closed_connection_cancels_its_request(server):
    body = json.dumps({"model": MODEL, "prompt": "Tell me everything", "max_tokens": 1900, "stream": True,
                       "ignore_eos": True}).encode()
    s = socket.create_connection(("127.0.0.1", server.port))
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "
              + str(len(body)).encode() + b"\r\n\r\n" + body)
    received = b""
    while b"data:" not in received:
        chunk = s.recv(4096)
        assert chunk, received
        received += chunk
    assert metric(server, "vllm:num_requests_running") == 1
    s.close()
    deadline = time.time() + 10
    while time.time() < deadline and metric(server, "vllm:num_requests_running") > 0:
        time.sleep(0.05)
    assert metric(server, "vllm:num_requests_running") == 0


def test_stalled_engine_turns_health_to_503_and_back(server):
    assert requests.get(server.url + "/health", timeout=10).status_code == 200
    requests.post(server.url + "/debug/stall?on=1", timeout=10)
    try:
        result = {}
        t = threading.Thread(target=lambda: result.update(r=stream_completion(server.url, 3)))
        t.start()
        deadline = time.time() + 10
        status = 200
        while time.time() < deadline and status == 200:
            time.sleep(0.2)
            health = requests.get(server.url + "/health", timeout=10)
            status = health.status_code
        assert status == 503
        # Wedged past --health-stall-timeout; then the engine process is killed and restarted (the
        # stream below still completes: test_engine_restart.py).
        message = health.json()["error"]["message"]
        assert "engine stalled" in message or "engine process is restarting" in message, message
    finally:
        requests.post(server.url + "/debug/stall?on=0", timeout=10)
    t.join(60)
    assert result["r"][1] == 3
    assert requests.get(server.url + "/health", timeout=10).status_code == 200


def test_full_waiting_queue_answers_503_with_retry_after(make_server):
    s = make_server("--enable-debug-endpoints", "--max-waiting-requests", "2")
    requests.post(s.url + "/debug/stall?on=1", timeout=10)
    threads = [threading.Thread(target=stream_completion, args=(s.url, 2)) for _ in range(2)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    r = requests.post(s.url + "/v1/completions", json={"model": MODEL, "prompt": "x", "max_tokens": 2}, timeout=10)
    assert r.status_code == 503
    assert r.headers["Retry-After"] == "1"
    assert r.json()["error"]["code"] == 503
    requests.post(s.url + "/debug/stall?on=0", timeout=10)
    for t in threads:
        t.join(60)
    s.stop()


def test_sigterm_drains_in_flight_streams_with_a_final_error(make_server):
    s = make_server("--shutdown-timeout", "1")
    lines = []

    def read():
        body = {"model": MODEL, "prompt": "Go on", "max_tokens": 2000, "stream": True, "ignore_eos": True}
        with requests.post(s.url + "/v1/completions", json=body, stream=True, timeout=60) as r:
            for line in r.iter_lines():
                if line:
                    lines.append(line.decode())

    t = threading.Thread(target=read)
    t.start()
    while not lines:
        time.sleep(0.05)
    start = time.time()
    code = s.stop(signal.SIGTERM, timeout=20)
    t.join(20)
    assert code == 0
    assert time.time() - start < 10
    assert lines[-1] == "data: [DONE]"
    # The final error says why (not "Internal server error"): the drain deadline cut the stream.
    error = json.loads(lines[-2][len("data: "):])["error"]
    assert "shutting down" in error["message"], error
    assert error["code"] == 503
    # New connections are refused once draining began.
    try:
        requests.get(s.url + "/health", timeout=2)
        refused = False
    except requests.RequestException:
        refused = True
    assert refused
