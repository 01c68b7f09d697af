"""SIGTERM as vLLM (0.18+, --shutdown-timeout) handles it: the server stops accepting (new
connections are refused, a request that still reaches it gets 503), requests in flight run to
their end within --shutdown-timeout, and the process exits 0. A stream still running when the
timeout passes ends with an error event the client sees (the official client raises), never a
silently shortened text that looks finished.
(test_serving_under_load.py has the raw-SSE form of the timeout case.)"""
import json
import signal
import threading
import time

import openai
import pytest
import requests

MODEL = "fp4serve-demo"
PROMPT = "Tell me about the sea"
TOKENS = 48


def stream_completion(url, out):
    """One greedy streamed completion; out gets its text, finish_reason and usage."""
    body = {"model": MODEL, "prompt": PROMPT, "max_tokens": TOKENS, "temperature": 0, "ignore_eos": True,
            "stream": True, "stream_options": {"include_usage": True}}
    out["text"], out["finish_reason"], out["usage"], out["events"] = "", None, None, []
    with requests.post(url + "/v1/completions", json=body, stream=True, timeout=120) as r:
        out["status"] = r.status_code
        for line in r.iter_lines():
            if not line:
                continue
            data = line.decode()[len("data: "):]
            out["events"].append(data)
            if data == "[DONE]":
                continue
            chunk = json.loads(data)
            for c in chunk.get("choices", []):
                out["text"] += c["text"]
                out["finish_reason"] = c["finish_reason"] or out["finish_reason"]
            if chunk.get("usage"):
                out["usage"] = chunk["usage"]


def refused_or_503(url, path="/v1/completions"):
    """What a new request meets while the server drains: 'refused', 503, or a surprise."""
    try:
        if path == "/health":
            return requests.get(url + path, timeout=5).status_code
        r = requests.post(url + path, json={"model": MODEL, "prompt": "x", "max_tokens": 1}, timeout=5)
        return r.status_code
    except requests.ConnectionError:
        return "refused"


def test_sigterm_finishes_in_flight_streams_refuses_new_work_and_exits_0(make_server):
    s = make_server("--shutdown-timeout", "60", "--max-num-seqs", "4")
    reference = requests.post(s.url + "/v1/completions", timeout=120, json={
        "model": MODEL, "prompt": PROMPT, "max_tokens": TOKENS, "temperature": 0, "ignore_eos": True}).json()
    want = reference["choices"][0]["text"]

    outs = [{} for _ in range(3)]
    threads = [threading.Thread(target=stream_completion, args=(s.url, o)) for o in outs]
    for t in threads:
        t.start()
    deadline = time.time() + 60
    while not all(o.get("text") for o in outs) and time.time() < deadline:
        time.sleep(0.02)
    assert all(o.get("text") for o in outs), "the streams never started"
    assert not any(o["finish_reason"] for o in outs), "streams ended before SIGTERM: make them longer"

    sigterm_at = time.time()
    s.proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    assert refused_or_503(s.url) in ("refused", 503)
    # /health too: a readiness probe fails from the first moment of the drain.
    assert refused_or_503(s.url, "/health") in ("refused", 503)

    code = s.proc.wait(60)
    for t in threads:
        t.join(30)
    assert code == 0
    for o in outs:
        assert o["status"] == 200
        assert o["events"][-1] == "[DONE]"
        assert not any('"error"' in e for e in o["events"]), o["events"]
        assert o["finish_reason"] == "length"
        assert o["usage"]["completion_tokens"] == TOKENS
        assert o["text"] == want  # the full greedy text, as an undisturbed run gives it
    assert time.time() - sigterm_at < 60
    assert "draining" in s.read_log()


def test_a_stream_past_the_shutdown_timeout_ends_with_an_error_the_client_sees(make_server):
    s = make_server("--shutdown-timeout", "1")
    client = openai.OpenAI(base_url=s.url + "/v1", api_key="unused", max_retries=0)
    got, raised, finish = [], [], []

    def read():
        try:
            stream = client.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": "Go on"}], max_tokens=1800, stream=True,
                extra_body={"ignore_eos": True})
            for chunk in stream:
                for c in chunk.choices:
                    got.append(c.delta.content or "")
                    if c.finish_reason:
                        finish.append(c.finish_reason)
        except openai.APIError as e:
            raised.append(e)

    plain = {}

    def read_plain():
        r = requests.post(s.url + "/v1/completions", timeout=60, json={
            "model": MODEL, "prompt": "Go on", "max_tokens": 1800, "ignore_eos": True})
        plain["status"], plain["body"] = r.status_code, r.json()

    t = threading.Thread(target=read)
    t.start()
    t_plain = threading.Thread(target=read_plain)
    t_plain.start()
    deadline = time.time() + 60
    while not got and not raised and time.time() < deadline:
        time.sleep(0.02)
    assert got, f"the stream never started: {raised}"
    start = time.time()
    s.proc.send_signal(signal.SIGTERM)
    code = s.proc.wait(30)
    t.join(30)
    t_plain.join(30)
    assert code == 0
    assert time.time() - start < 10  # 1 s of drain, then the cut and the exit
    # Cut, and said so: the client raises with the server's reason; no finish_reason pretends the
    # text ended normally.
    assert raised, f"the stream ended silently after {len(got)} chunks (finish_reason {finish})"
    assert "shutting down" in str(raised[0])
    assert finish == []
    # A request that is not streamed gets the same reason as a 503 error body, not a truncated text.
    assert plain["status"] == 503, plain
    assert "shutting down" in plain["body"]["error"]["message"]
