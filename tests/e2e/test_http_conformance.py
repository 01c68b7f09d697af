"""HTTP/1.1 details that real clients trip on, over raw sockets, every response parsed by h11 (a
strict client-side parser, the one uvicorn and httpx build on), not by our own code: HEAD answered
route by route as vLLM's FastAPI/uvicorn stack answers it and never with a body, Connection: close
against keep-alive, Expect: 100-continue, chunked request bodies, pipelined requests, HTTP/1.0, and
a method nobody registered."""
import json
import socket

import h11
import pytest

MODEL = "fp4serve-demo"

# vLLM's answers to HEAD (FastAPI routes declare GET or POST only, so HEAD is 405 with an Allow
# header; /metrics is a Starlette Mount of prometheus_client's ASGI app, which answers any method;
# an unknown path is 404). uvicorn sends the head of the response and drops the body.
HEAD_ANSWERS = [
    ("/metrics", 200, None),
    ("/health", 405, "GET"),
    ("/ping", 405, "GET, POST"),  # vLLM's Starlette names one of its two routes' methods; we name both
    ("/version", 405, "GET"),
    ("/v1/models", 405, "GET"),
    ("/v1/chat/completions", 405, "POST"),
    ("/v1/completions", 405, "POST"),
    ("/tokenize", 405, "POST"),
    ("/no/such/path", 404, None),
]


class H11Client:
    """One TCP connection; h11 decides where every response starts and ends."""

    def __init__(self, server):
        self.sock = socket.create_connection(("127.0.0.1", server.port), timeout=20)
        self.conn = h11.Connection(h11.CLIENT)
        self.host = f"127.0.0.1:{server.port}".encode()

    def close(self):
        self.sock.close()

    def request_bytes(self, method, target, headers=(), body=None):
        """Registers the request with h11 (so that it knows how the response is framed: no body
        after HEAD) and returns its bytes without sending them."""
        hdrs = [("Host", self.host), *headers]
        if body is not None and not any(k.lower() == "transfer-encoding" for k, _ in headers):
            hdrs.append(("Content-Length", str(len(body))))
        out = self.conn.send(h11.Request(method=method, target=target, headers=hdrs))
        if body is not None:
            out += self.conn.send(h11.Data(data=body))
        out += self.conn.send(h11.EndOfMessage())
        return out

    def next_event(self):
        while True:
            event = self.conn.next_event()
            if event is h11.NEED_DATA:
                data = self.sock.recv(65536)
                self.conn.receive_data(data)  # b"" is EOF: h11 raises if a response was cut short
                continue
            return event

    def read_response(self):
        """(status, headers dict, body bytes) of one whole response; 1xx answers are skipped."""
        event = self.next_event()
        while isinstance(event, h11.InformationalResponse):
            event = self.next_event()
        assert isinstance(event, h11.Response), event
        status, headers = event.status_code, {k.decode().lower(): v.decode() for k, v in event.headers}
        body = b""
        while True:
            event = self.next_event()
            if isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                return status, headers, body
            else:
                raise AssertionError(f"unexpected {event!r}")

    def exchange(self, method, target, headers=(), body=None):
        self.sock.sendall(self.request_bytes(method, target, headers, body))
        response = self.read_response()
        if self.conn.our_state is h11.DONE and self.conn.their_state is h11.DONE:
            self.conn.start_next_cycle()
        return response

    def server_closed(self):
        """True when the server closed the connection (EOF) with nothing more sent."""
        self.sock.settimeout(5)
        return self.sock.recv(1) == b""


@pytest.fixture()
def h11_client(server):
    c = H11Client(server)
    yield c
    c.close()


def tokenize_body(text="hello world"):
    return json.dumps({"model": MODEL, "prompt": text}).encode()


@pytest.mark.parametrize("path,status,allow", HEAD_ANSWERS)
def test_head_is_answered_like_vllm_and_never_with_a_body(h11_client, path, status, allow):
    got, headers, body = h11_client.exchange("HEAD", path)
    assert (got, body) == (status, b"")
    if allow:
        assert headers["allow"] == allow
    # Content-Length is what GET would send (RFC 9110 9.3.2), so it is there and positive.
    assert int(headers["content-length"]) > 0
    # The connection is still in step: a stray body would be parsed as the next status line.
    assert h11_client.exchange("GET", "/health")[0] == 200


def test_head_content_length_matches_get(h11_client):
    # 405's body is {"detail":"Method Not Allowed"}: 31 bytes.
    assert h11_client.exchange("HEAD", "/health")[1]["content-length"] == "31"
    _, _, get_body = h11_client.exchange("GET", "/no/such/path")
    assert get_body == b'{"detail":"Not Found"}'
    _, head_headers, _ = h11_client.exchange("HEAD", "/no/such/path")
    assert head_headers["content-length"] == str(len(get_body))


def test_keep_alive_serves_many_requests_on_one_connection(h11_client):
    for _ in range(3):
        status, headers, body = h11_client.exchange("POST", "/tokenize", [("Content-Type", "application/json")],
                                                    tokenize_body())
        assert status == 200 and json.loads(body)["count"] > 0
        assert headers.get("connection", "") != "close"
    assert h11_client.exchange("GET", "/v1/models")[0] == 200


def test_connection_close_is_honoured(h11_client):
    status, headers, _ = h11_client.exchange("GET", "/v1/models", [("Connection", "close")])
    assert status == 200 and headers["connection"] == "close"
    assert h11_client.conn.their_state is h11.MUST_CLOSE or h11_client.conn.their_state is h11.CLOSED
    assert h11_client.server_closed()


def test_expect_100_continue_waits_for_the_go_ahead(h11_client):
    body = tokenize_body("the body is sent only after 100 Continue")
    head = h11_client.conn.send(h11.Request(method="POST", target="/tokenize", headers=[
        ("Host", h11_client.host), ("Content-Type", "application/json"),
        ("Content-Length", str(len(body))), ("Expect", "100-continue")]))
    h11_client.sock.sendall(head)
    interim = h11_client.next_event()
    assert isinstance(interim, h11.InformationalResponse) and interim.status_code == 100
    h11_client.sock.sendall(h11_client.conn.send(h11.Data(data=body)) + h11_client.conn.send(h11.EndOfMessage()))
    status, _, answer = h11_client.read_response()
    assert status == 200 and json.loads(answer)["count"] > 0


def test_chunked_request_body_equals_the_same_body_with_a_length(server, h11_client):
    body = tokenize_body("a chunked request body, split in odd places")
    _, _, plain = h11_client.exchange("POST", "/tokenize", [("Content-Type", "application/json")], body)
    out = h11_client.conn.send(h11.Request(method="POST", target="/tokenize", headers=[
        ("Host", h11_client.host), ("Content-Type", "application/json"), ("Transfer-Encoding", "chunked")]))
    for i in range(0, len(body), 7):
        out += h11_client.conn.send(h11.Data(data=body[i:i + 7]))
    out += h11_client.conn.send(h11.EndOfMessage())
    h11_client.sock.sendall(out)
    status, _, chunked = h11_client.read_response()
    assert status == 200 and json.loads(chunked) == json.loads(plain)


def test_pipelined_requests_are_answered_in_order(h11_client):
    # h11 lets a client send one request per cycle, so the bytes of three requests are built on a
    # scratch connection, sent in one write, and the responses read one cycle at a time.
    scratch = h11.Connection(h11.CLIENT)
    wire = b""
    plan = [("GET", "/v1/models", None), ("POST", "/tokenize", tokenize_body("one")), ("HEAD", "/health", None),
            ("POST", "/tokenize", tokenize_body("two three"))]
    for method, target, body in plan:
        hdrs = [("Host", h11_client.host)]
        if body is not None:
            hdrs += [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
        wire += scratch.send(h11.Request(method=method, target=target, headers=hdrs))
        wire += (scratch.send(h11.Data(data=body)) if body is not None else b"") + scratch.send(h11.EndOfMessage())
        scratch = h11.Connection(h11.CLIENT)  # one request per scratch connection
    h11_client.sock.sendall(wire)
    answers = []
    for method, target, body in plan:
        h11_client.request_bytes(method, target, [("Content-Type", "application/json")] if body else (), body)
        answers.append(h11_client.read_response())
        h11_client.conn.start_next_cycle()
    assert [a[0] for a in answers] == [200, 200, 405, 200]
    assert json.loads(answers[0][2])["object"] == "list"
    assert json.loads(answers[1][2])["count"] < json.loads(answers[3][2])["count"]
    assert answers[2][2] == b""


def test_http10_request_is_answered_and_the_connection_closed(server):
    # h11 only writes HTTP/1.1; the HTTP/1.0 bytes go out raw and h11 (told of an equivalent
    # request that asks to close) parses the answer.
    client = H11Client(server)
    try:
        client.request_bytes("GET", "/v1/models", [("Connection", "close")])
        client.sock.sendall(b"GET /v1/models HTTP/1.0\r\n\r\n")
        status, headers, body = client.read_response()
        assert status == 200 and json.loads(body)["data"][0]["id"] == MODEL
        assert client.server_closed()
    finally:
        client.close()


def test_unknown_method_gets_405_with_allow_or_404(h11_client):
    status, headers, body = h11_client.exchange("BREW", "/health")
    assert (status, headers["allow"], json.loads(body)) == (405, "GET", {"detail": "Method Not Allowed"})
    status, _, body = h11_client.exchange("BREW", "/no/such/path")
    assert (status, json.loads(body)) == (404, {"detail": "Not Found"})
    assert h11_client.exchange("GET", "/health")[0] == 200
