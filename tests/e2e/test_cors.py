"""CORS as `vllm serve` answers it: Starlette's CORSMiddleware with vLLM's defaults (any origin,
method and header, no credentials) and with --allowed-origins/--allowed-methods/--allowed-headers/
--allow-credentials. Requests are what a browser sends (a preflight OPTIONS with Origin,
Access-Control-Request-Method and Access-Control-Request-Headers, then the request with Origin);
the expected values are those starlette/middleware/cors.py produces for vLLM's arguments."""
import json
import os
import subprocess

import pytest
import requests

MODEL = "fp4serve-demo"
APP = "https://app.example"
STARLETTE_ALL_METHODS = "DELETE, GET, HEAD, OPTIONS, PATCH, POST, PUT"
CHAT = {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}


def preflight(url, path, origin=APP, method="POST", headers="authorization,content-type"):
    h = {"Origin": origin, "Access-Control-Request-Method": method}
    if headers is not None:
        h["Access-Control-Request-Headers"] = headers
    return requests.options(url + path, headers=h, timeout=30)


def test_vllm_defaults_answer_a_browser_preflight(server):
    r = preflight(server.url, "/v1/chat/completions")
    assert (r.status_code, r.text) == (200, "OK")
    assert r.headers["content-type"] == "text/plain; charset=utf-8"
    assert r.headers["access-control-allow-origin"] == "*"
    assert r.headers["access-control-allow-methods"] == STARLETTE_ALL_METHODS
    assert r.headers["access-control-allow-headers"] == "authorization,content-type"  # echoed as sent
    assert r.headers["access-control-max-age"] == "600"
    assert "vary" not in r.headers and "access-control-allow-credentials" not in r.headers
    # Answered before routing: any path, even one that does not exist.
    assert preflight(server.url, "/no/such/route").status_code == 200
    # Starlette compares methods case-sensitively.
    bad = preflight(server.url, "/v1/chat/completions", method="post")
    assert (bad.status_code, bad.text) == (400, "Disallowed CORS method")


def test_vllm_defaults_on_simple_and_streamed_requests(server):
    r = requests.post(server.url + "/v1/chat/completions", json=CHAT, headers={"Origin": APP}, timeout=60)
    assert r.status_code == 200
    assert r.headers["access-control-allow-origin"] == "*"
    assert "vary" not in r.headers
    with requests.post(server.url + "/v1/chat/completions", json=dict(CHAT, stream=True),
                       headers={"Origin": APP}, stream=True, timeout=60) as s:
        assert s.headers["access-control-allow-origin"] == "*"
        assert s.headers["content-type"] == "text/event-stream; charset=utf-8"
        assert b"data: [DONE]" in b"".join(s.iter_content(None))
    # Errors carry the header too (they come from inside vLLM's CORS middleware).
    missing = requests.get(server.url + "/v1/nope", headers={"Origin": APP}, timeout=30)
    assert missing.status_code == 404 and missing.headers["access-control-allow-origin"] == "*"
    # Cookies make Starlette name the origin instead of "*".
    cookie = requests.get(server.url + "/v1/models", headers={"Origin": APP, "Cookie": "a=b"}, timeout=30)
    assert cookie.headers["access-control-allow-origin"] == APP
    assert cookie.headers["vary"] == "Origin"
    # No Origin, no CORS headers.
    plain = requests.get(server.url + "/v1/models", timeout=30)
    assert not [h for h in plain.headers if h.lower().startswith("access-control-")]


@pytest.fixture(scope="module")
def strict_server(make_server):
    return make_server("--allowed-origins", json.dumps([APP]), "--allowed-methods", '["GET", "POST"]',
                       "--allowed-headers", '["Authorization", "Content-Type"]', "--allow-credentials",
                       "--api-key", "sk-test")


def test_listed_origins_methods_and_headers(strict_server):
    url = strict_server.url
    ok = preflight(url, "/v1/chat/completions")  # no API key: vLLM never checks OPTIONS
    assert (ok.status_code, ok.text) == (200, "OK")
    assert ok.headers["access-control-allow-origin"] == APP
    assert ok.headers["vary"] == "Origin"
    assert ok.headers["access-control-allow-credentials"] == "true"
    assert ok.headers["access-control-allow-methods"] == "GET, POST"
    # sorted(SAFELISTED_HEADERS | allowed), as listed, not as requested
    assert ok.headers["access-control-allow-headers"] == \
        "Accept, Accept-Language, Authorization, Content-Language, Content-Type"

    other = preflight(url, "/v1/chat/completions", origin="https://evil.example")
    assert (other.status_code, other.text) == (400, "Disallowed CORS origin")
    assert "access-control-allow-origin" not in other.headers
    put = preflight(url, "/v1/chat/completions", method="PUT", headers="x-evil")
    assert (put.status_code, put.text) == (400, "Disallowed CORS method, headers")
    everything = preflight(url, "/v1/chat/completions", origin="https://evil.example", method="PUT", headers="x-evil")
    assert everything.text == "Disallowed CORS origin, method, headers"


def test_listed_origins_on_requests_and_the_api_key_refusal(strict_server):
    url = strict_server.url
    key = {"Authorization": "Bearer sk-test"}
    r = requests.post(url + "/v1/chat/completions", json=CHAT, headers={"Origin": APP, **key}, timeout=60)
    assert r.status_code == 200
    assert r.headers["access-control-allow-origin"] == APP
    assert r.headers["vary"] == "Origin"
    assert r.headers["access-control-allow-credentials"] == "true"
    # Another origin is served (the browser enforces CORS) but not allowed to read the answer.
    evil = requests.get(url + "/v1/models", headers={"Origin": "https://evil.example", **key}, timeout=30)
    assert evil.status_code == 200
    assert "access-control-allow-origin" not in evil.headers
    assert evil.headers["access-control-allow-credentials"] == "true"
    # vLLM's API-key middleware sits outside CORS: its 401 has no CORS headers.
    refused = requests.get(url + "/v1/models", headers={"Origin": APP}, timeout=30)
    assert refused.status_code == 401
    assert refused.json() == {"error": "Unauthorized"}
    assert "access-control-allow-origin" not in refused.headers


@pytest.mark.parametrize("flag, value", [
    ("--allowed-origins", "https://app.example"),  # not JSON
    ("--allowed-methods", '"GET"'),                # JSON, but not a list
    ("--allowed-headers", '["X-A", 1]'),           # not all strings
])
def test_cors_lists_must_be_json_lists_of_strings(fp4serve_binary, cache_dir, flag, value):
    p = subprocess.run([str(fp4serve_binary), "serve", "--port", "0", flag, value],
                       capture_output=True, text=True, timeout=60, env=dict(os.environ, FP4SERVE_CACHE=str(cache_dir)))
    assert p.returncode != 0
    assert f"{flag} must be a JSON list of strings" in p.stderr, p.stderr
