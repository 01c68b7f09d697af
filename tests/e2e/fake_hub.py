"""A fake Hugging Face Hub on loopback for the download tests: the endpoints huggingface_hub (and
fp4serve's hub client) use, with the hub's headers, plus faults on demand.

  GET  /api/models/{repo}/revision/{rev}   {"id", "sha", "siblings": [{"rfilename"}]}
  HEAD|GET /{repo}/resolve/{rev}/{file}    small files: 200, ETag = git blob sha1, X-Repo-Commit;
                                           LFS files (*.safetensors): 302 to /cdn/{sha256} with
                                           X-Linked-Etag (sha256), X-Linked-Size, X-Repo-Commit
  GET  /cdn/{sha256}                       the bytes, Range: bytes=N- answered with 206

Errors carry X-Error-Code as the hub's do (RepoNotFound, RevisionNotFound, GatedRepo). Faults
(FakeHub.faults, a dict): "status" -> answer every API/resolve request with that status (401, 403,
404); "cut_once" -> {file: n} close the connection after n body bytes of the next download of file;
"truncate_once" -> {file: n} send only n bytes (with a matching Content-Length) once; "corrupt" ->
{file} flip a byte of every download of file; "linked_size" -> {file: n} announce n bytes in HEAD.
Every request is logged in FakeHub.requests as (method, path, Range header, Authorization header).

Run by hand for a throughput figure:  python tests/e2e/fake_hub.py DIR org/name  (prints the endpoint)
"""
import hashlib
import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class Repo:
    def __init__(self, repo_id: str, files: dict, commit: str = None, private: bool = False):
        self.repo_id = repo_id
        self.files = files  # name -> bytes
        self.commit = commit or hashlib.sha1(repo_id.encode() + "".join(sorted(files)).encode()).hexdigest()
        self.private = private
        self.sha256 = {n: hashlib.sha256(b).hexdigest() for n, b in files.items() if self.is_lfs(n)}

    @staticmethod
    def is_lfs(name: str) -> bool:
        return name.endswith(".safetensors")

    @classmethod
    def from_dir(cls, repo_id: str, *dirs, extra: dict = None, **kw):
        files = {}
        for d in dirs:
            for p in sorted(Path(d).iterdir()):
                if p.is_file():
                    files[p.name] = p.read_bytes()
        files.update(extra or {})
        return cls(repo_id, files, **kw)


class FakeHub:
    def __init__(self, *repos: Repo, token: str = None):
        self.repos = {r.repo_id: r for r in repos}
        self.token = token  # when set, private repos need "Bearer <token>"
        self.faults = {}
        self.requests = []
        self.lock = threading.Lock()
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_HEAD(self):
                hub.handle(self, head=True)

            def do_GET(self):
                hub.handle(self, head=False)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        # Another host name for the same server: the redirect leaves the endpoint's host as the real
        # hub's does (cdn-lfs.hf.co), so clients must not forward the token there.
        self.cdn_url = f"http://localhost:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()

    def downloads(self, name=None):
        """The GETs of file bytes (CDN or resolve), optionally of one file."""
        with self.lock:
            out = []
            for method, path, rng, _ in self.requests:
                if method != "GET" or "/api/" in path:
                    continue
                if "/cdn/" in path or "/resolve/" in path:
                    if name is None or path.endswith("/" + name) or self._cdn_name(path) == name:
                        out.append((path, rng))
            return out

    def _cdn_name(self, path):
        sha = path.rsplit("/", 1)[-1].split("?")[0]
        for r in self.repos.values():
            for n, s in r.sha256.items():
                if s == sha:
                    return n
        return None

    # -- request handling ------------------------------------------------------------------
    def reply(self, h, status, headers=None, body=b"", head=False, error_code=None):
        h.send_response(status)
        if error_code:
            h.send_header("X-Error-Code", error_code)
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        if "Content-Length" not in (headers or {}):
            h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        if not head and body:
            h.wfile.write(body)

    def handle(self, h, head):
        path = urllib.parse.urlsplit(h.path).path
        with self.lock:
            self.requests.append((h.command, path, h.headers.get("Range"), h.headers.get("Authorization")))
        parts = [urllib.parse.unquote(p) for p in path.split("/")[1:]]
        if parts[:1] == ["cdn"] and len(parts) == 2:
            return self.serve_cdn(h, parts[1], head)
        if parts[:2] == ["api", "models"] and len(parts) >= 6 and parts[4] == "revision":
            return self.serve_api(h, parts[2] + "/" + parts[3], "/".join(parts[5:]), head)
        if len(parts) >= 5 and parts[2] == "resolve":
            return self.serve_resolve(h, parts[0] + "/" + parts[1], parts[3], "/".join(parts[4:]), head)
        self.reply(h, 404, body=b"not found", head=head)

    def check_repo(self, h, repo_id, rev, head):
        status = self.faults.get("status")
        if status:
            code = {401: "GatedRepo", 403: "GatedRepo", 404: "RepoNotFound"}.get(status)
            self.reply(h, status, {"X-Error-Message": f"fault {status}"}, b"{}", head, code)
            return None
        repo = self.repos.get(repo_id)
        if repo is None:
            self.reply(h, 404, {"X-Error-Message": "Repository not found"}, b"{}", head, "RepoNotFound")
            return None
        if repo.private and h.headers.get("Authorization") != f"Bearer {self.token}":
            self.reply(h, 401, {"X-Error-Message": "Access to this repo is restricted"}, b"{}", head, "GatedRepo")
            return None
        if rev not in ("main", repo.commit):
            self.reply(h, 404, {"X-Error-Message": "Invalid rev id"}, b"{}", head, "RevisionNotFound")
            return None
        return repo

    def serve_api(self, h, repo_id, rev, head):
        repo = self.check_repo(h, repo_id, rev, head)
        if repo is None:
            return
        body = json.dumps({"id": repo_id, "modelId": repo_id, "sha": repo.commit, "private": repo.private,
                           "siblings": [{"rfilename": n} for n in sorted(repo.files)]}).encode()
        self.reply(h, 200, {"Content-Type": "application/json"}, body, head)

    def serve_resolve(self, h, repo_id, rev, name, head):
        repo = self.check_repo(h, repo_id, rev, head)
        if repo is None:
            return
        if name not in repo.files:
            self.reply(h, 404, {"X-Error-Message": "Entry not found"}, b"{}", head, "EntryNotFound")
            return
        data = repo.files[name]
        common = {"X-Repo-Commit": repo.commit, "Accept-Ranges": "bytes"}
        if repo.is_lfs(name):
            size = self.faults.get("linked_size", {}).get(name, len(data))
            sha = repo.sha256[name]
            self.reply(h, 302, dict(common, **{"Location": f"{self.cdn_url}/cdn/{sha}?sig=fake", "X-Linked-Etag": f'"{sha}"',
                                                "X-Linked-Size": str(size), "ETag": f'"{git_blob_sha1(data)}"'}),
                       b"", head)
            return
        self.send_bytes(h, name, data, dict(common, ETag=f'"{git_blob_sha1(data)}"'), head)

    def serve_cdn(self, h, sha, head):
        for repo in self.repos.values():
            for name, s in repo.sha256.items():
                if s == sha:
                    return self.send_bytes(h, name, repo.files[name], {"ETag": f'"{sha}"'}, head)
        self.reply(h, 404, body=b"no such object", head=head)

    def send_bytes(self, h, name, data, headers, head):
        if name in self.faults.get("corrupt", ()):
            data = bytearray(data)
            data[len(data) // 2] ^= 0xFF
            data = bytes(data)
        start = 0
        rng = h.headers.get("Range")
        status = 200
        if rng and rng.startswith("bytes=") and rng.endswith("-"):
            start = int(rng[6:-1])
            if start >= len(data):
                self.reply(h, 416, {"Content-Range": f"bytes */{len(data)}"}, b"", head)
                return
            status = 206
            headers = dict(headers, **{"Content-Range": f"bytes {start}-{len(data) - 1}/{len(data)}"})
        body = data[start:]
        cut = None
        with self.lock:
            if not head and name in self.faults.get("cut_once", {}):
                cut = self.faults["cut_once"].pop(name)
            if not head and name in self.faults.get("truncate_once", {}):
                body = body[: self.faults["truncate_once"].pop(name)]
        h.send_response(status)
        for k, v in headers.items():
            h.send_header(k, v)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        if head:
            return
        if cut is not None:
            h.wfile.write(body[:cut])
            h.wfile.flush()
            h.close_connection = True
            h.connection.shutdown(2)
            return
        view = memoryview(body)
        for i in range(0, len(body), 1 << 20):
            h.wfile.write(view[i:i + (1 << 20)])


if __name__ == "__main__":
    import sys
    import time
    hub = FakeHub(Repo.from_dir(sys.argv[2], sys.argv[1]))
    with hub:
        print(hub.url, flush=True)
        while True:
            time.sleep(3600)
