"""--root-path and --uds as vLLM has them. vLLM sets FastAPI's root_path, and Starlette's
get_route_path (0.35 and later, the versions vLLM's FastAPI pins) routes a request under the prefix
and one without it alike, so a proxy may forward /PREFIX/v1/... or strip it. --uds serves on a Unix
socket and ignores --host/--port; the official openai client reaches it through httpx's UDS transport."""
import os
import shutil
import socket
import tempfile

import httpx
import openai
import pytest
import requests

MODEL = "fp4serve-demo"


def test_root_path_answers_with_and_without_the_prefix(make_server):
    s = make_server("--root-path", "/llm", "--api-key", "sk-test")
    prefixed = openai.OpenAI(base_url=s.url + "/llm/v1", api_key="sk-test")
    r = prefixed.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}], max_tokens=4)
    assert r.usage.completion_tokens > 0
    bare = openai.OpenAI(base_url=s.url + "/v1", api_key="sk-test")
    assert [m.id for m in bare.models.list().data] == [MODEL]
    key = {"Authorization": "Bearer sk-test"}
    assert requests.get(s.url + "/llm/health", timeout=30).status_code == 200
    assert requests.get(s.url + "/llm/v1/models", timeout=30).status_code == 401  # the key guards /llm/v1 too
    # The prefix must end at a segment, and alone it is no route (Starlette: route path "").
    assert requests.get(s.url + "/llmv1/models", headers=key, timeout=30).status_code == 404
    assert requests.get(s.url + "/llm", headers=key, timeout=30).status_code == 404
    assert requests.get(s.url + "/other/v1/models", headers=key, timeout=30).status_code == 404


@pytest.fixture()
def socket_dir():
    # Not under pytest's tmp_path: a Unix socket path must fit in 108 bytes.
    d = tempfile.mkdtemp(prefix="fp4-uds-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_uds_serves_the_openai_client_and_not_tcp(make_server, socket_dir):
    path = os.path.join(socket_dir, "fp4serve.sock")
    s = make_server(uds=path)
    assert f"on unix:{path}" in s.read_log()
    http_client = httpx.Client(transport=httpx.HTTPTransport(uds=path))
    client = openai.OpenAI(base_url="http://localhost/v1", api_key="unused", http_client=http_client)
    r = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}], max_tokens=4)
    assert r.object == "chat.completion"
    chunks = list(client.completions.create(model=MODEL, prompt="Hello", max_tokens=4, stream=True))
    assert chunks and chunks[-1].choices[0].finish_reason in ("stop", "length")
    # --host/--port are ignored: nothing listens on the TCP port the harness passed.
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", s.port), timeout=5).close()
    assert s.stop() == 0
    assert not os.path.exists(path)  # the socket file goes with the server
