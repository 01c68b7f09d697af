"""TLS with vLLM's flags (--ssl-certfile, --ssl-keyfile, --ssl-ca-certs, --ssl-cert-reqs), driven by
the official openai client over https. The certificates are made at test time with the openssl CLI:
a CA, a server certificate it signs for 127.0.0.1, a client certificate it signs, and a self-signed
stranger."""
import os
import socket
import ssl
import subprocess
import time

import httpx
import openai
import pytest

MODEL = "fp4serve-demo"


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def signed_by_ca(name, ext, cwd):
    """name.key + name.pem, an EC P-256 certificate signed by ca.pem with the extensions in `ext`."""
    (cwd / f"{name}.ext").write_text(ext + "\nsubjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid,issuer\n")
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", f"{name}.key",
            "-out", f"{name}.csr", "-subj", f"/CN={name}", cwd=cwd)
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-days", "2", "-sha256", "-extfile", f"{name}.ext", "-out", f"{name}.pem", cwd=cwd)


def trusting(ca, cert=None):
    """A client TLS context that trusts `ca` and presents `cert` = (cert, key). (httpx 0.28 ignores
    `cert=` when `verify` is a path, so the context is built here.)"""
    ctx = ssl.create_default_context(cafile=ca)
    if cert:
        ctx.load_cert_chain(*cert)
    return ctx


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    d = tmp_path_factory.mktemp("tls")
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "ca.key",
            "-out", "ca.pem", "-days", "2", "-subj", "/CN=fp4serve test CA",
            "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d)
    signed_by_ca("server", "basicConstraints=CA:FALSE\nsubjectAltName=IP:127.0.0.1,DNS:localhost", d)
    signed_by_ca("client", "basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth", d)
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
            "stranger.key", "-out", "stranger.pem", "-days", "2", "-subj", "/CN=stranger", cwd=d)
    openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", "other.key", cwd=d)
    (d / "garbage.pem").write_text("-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n")
    return {p.name: str(p) for p in d.iterdir()}


@pytest.fixture(scope="module")
def https_server(make_server, certs):
    return make_server("--ssl-certfile", certs["server.pem"], "--ssl-keyfile", certs["server.key"],
                       "--request-head-timeout", "2", verify=certs["ca.pem"])


def test_openai_client_chats_and_streams_over_https(https_server, certs):
    assert https_server.url.startswith("https://")
    assert f"on https://127.0.0.1:{https_server.port}" in https_server.read_log()
    client = openai.OpenAI(base_url=https_server.url + "/v1", api_key="unused",
                           http_client=httpx.Client(verify=trusting(certs["ca.pem"])))
    r = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}], max_tokens=8)
    assert r.object == "chat.completion"
    assert r.usage.completion_tokens > 0
    assert isinstance(r.choices[0].message.content, str)

    chunks = list(client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}],
                                                 max_tokens=8, stream=True))
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-1].choices[0].finish_reason in ("stop", "length")
    assert len({c.id for c in chunks}) == 1 and len(chunks) >= 3


def test_the_certificate_is_the_one_given_and_plain_http_gets_nothing(https_server):
    # A client that trusts only the system CAs refuses our self-made certificate...
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        httpx.get(https_server.url + "/health")
    # ...and plain HTTP on the TLS port is a failed handshake: closed without an HTTP answer.
    with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
        httpx.get(f"http://127.0.0.1:{https_server.port}/health")
    assert https_server.get("/health").status_code == 200


def test_a_client_that_never_handshakes_is_closed_at_the_head_deadline(https_server):
    s = socket.create_connection(("127.0.0.1", https_server.port))
    s.settimeout(10)
    start = time.monotonic()
    try:
        data = s.recv(1)  # b"" at EOF
    except ConnectionResetError:
        data = b""
    waited = time.monotonic() - start
    s.close()
    assert data == b""
    assert 1.5 < waited < 6, waited  # --request-head-timeout 2


def test_required_client_certificates_are_checked_against_the_ca(make_server, certs):
    s = make_server("--ssl-certfile", certs["server.pem"], "--ssl-keyfile", certs["server.key"],
                    "--ssl-ca-certs", certs["ca.pem"], "--ssl-cert-reqs", "2",
                    verify=certs["ca.pem"], client_cert=(certs["client.pem"], certs["client.key"]))
    with_cert = httpx.Client(verify=trusting(certs["ca.pem"], (certs["client.pem"], certs["client.key"])))
    client = openai.OpenAI(base_url=s.url + "/v1", api_key="unused", http_client=with_cert)
    assert [m.id for m in client.models.list().data] == [MODEL]

    for cert in (None, (certs["stranger.pem"], certs["stranger.key"])):
        with pytest.raises((httpx.ConnectError, httpx.ReadError, httpx.RemoteProtocolError)):
            httpx.Client(verify=trusting(certs["ca.pem"], cert)).get(s.url + "/v1/models")
    assert s.get("/health").status_code == 200


@pytest.mark.parametrize("flags, named, why", [
    (["--ssl-certfile", "@missing", "--ssl-keyfile", "@server.key"], "@missing", "no such file"),
    (["--ssl-certfile", "@garbage.pem", "--ssl-keyfile", "@server.key"], "@garbage.pem", "not a PEM certificate"),
    (["--ssl-certfile", "@server.pem", "--ssl-keyfile", "@garbage.pem"], "@garbage.pem", "not a PEM private key"),
    (["--ssl-certfile", "@server.pem", "--ssl-keyfile", "@other.key"], "@other.key", "does not match"),
    (["--ssl-certfile", "@server.pem", "--ssl-keyfile", "@server.key", "--ssl-ca-certs", "@garbage.pem"],
     "@garbage.pem", "not a PEM CA bundle"),
    (["--ssl-certfile", "@server.pem", "--ssl-keyfile", "@server.key", "--ssl-cert-reqs", "3"],
     "--ssl-cert-reqs 3", "must be 0"),
])
def test_a_bad_key_or_certificate_is_refused_at_start_naming_the_file(fp4serve_binary, cache_dir, certs, tmp_path,
                                                                      flags, named, why):
    paths = dict(certs, missing=str(tmp_path / "missing.pem"))
    fill = lambda a: paths[a[1:]] if a.startswith("@") else a  # noqa: E731  "@name": a file made above
    start = time.monotonic()
    p = subprocess.run([str(fp4serve_binary), "serve", "--host", "127.0.0.1", "--port", "0", *map(fill, flags)],
                       capture_output=True, text=True, timeout=60, env=dict(os.environ, FP4SERVE_CACHE=str(cache_dir)))
    assert p.returncode != 0
    assert fill(named) in p.stderr, p.stderr
    assert why in p.stderr, p.stderr
    # Refused before the model loads: no cache plan was logged and it took no load time.
    assert "KV cache size" not in p.stdout + p.stderr
    assert time.monotonic() - start < 10
