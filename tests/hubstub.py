"""A local stand-in for the Hugging Face Hub's file endpoint, on 127.0.0.1 only.

It serves ``/{repo}/resolve/{revision}/config.json`` for the repos it is given and answers the
Hub's error codes (``X-Error-Code``) for missing, gated and revision-less repos, so the Hub path
of ``kvplan`` is tested without the internet. Extra ``files`` (``{repo: {name: bytes}}``) are served
too, with HTTP Range support (206 + Content-Range), and listed by ``/api/models/{repo}``; every
range answered is kept in ``ranges`` so tests can check how much of a file was read.

``fault`` makes it a hostile Hub for every request: ``hang`` (accept, never answer), ``trickle``
(headers, then one byte a second), ``500``/``503``/``429``/``403`` (a bare HTTP error, no Hub error
code), ``redirect`` (302 to itself, forever), ``short`` (a Content-Length it never sends) and ``flood`` (a
config.json body with no Content-Length that never ends: 256 MiB, counted in ``sent_bytes``).
"""

from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

COMMIT = "0123456789abcdef0123456789abcdef01234567"


class HubStub:
    FAULTS = ("hang", "trickle", "500", "503", "429", "403", "redirect", "short", "flood")
    FLOOD_BYTES = 256 * 1024**2

    def __init__(
        self,
        repos: dict[str, Any],
        *,
        gated: set[str] | None = None,
        token: str | None = None,
        files: dict[str, dict[str, bytes]] | None = None,
        fault: str | None = None,
    ) -> None:
        assert fault is None or fault in self.FAULTS, fault
        self.repos = {k: (v if isinstance(v, bytes) else json.dumps(v).encode()) for k, v in repos.items()}
        self.files = files or {}
        self.ranges: list[tuple[str, int, int]] = []
        self.gated = gated or set()
        self.token = token
        self.fault = fault
        self.closing = threading.Event()
        self.requests: list[tuple[str, str]] = []
        self.sent_bytes = 0
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_HEAD(self) -> None:
                stub.handle(self, body=False)

            def do_GET(self) -> None:
                stub.handle(self, body=True)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> HubStub:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.closing.set()  # ends hanging and trickling handlers
        self.server.shutdown()
        self.server.server_close()

    def handle(self, req: BaseHTTPRequestHandler, *, body: bool) -> None:
        self.requests.append((req.command, req.path))
        if self.fault is not None:
            return self.misbehave(req)
        path = req.path.split("?")[0].lstrip("/")
        if path.startswith("api/models/"):
            return self.model_info(req, path.removeprefix("api/models/"), body)
        if "/resolve/" not in path:
            return self.error(req, 404, "RepoNotFound", body)
        repo, _, rest = path.partition("/resolve/")
        revision, _, filename = rest.partition("/")
        if repo in self.gated:
            auth = req.headers.get("Authorization", "")
            if not self.token or auth != f"Bearer {self.token}":
                return self.error(req, 401 if not auth else 403, "GatedRepo", body)
        if repo not in self.repos and repo not in self.files:
            return self.error(req, 401, "RepoNotFound", body)
        if revision not in ("main", COMMIT):
            return self.error(req, 404, "RevisionNotFound", body)
        if filename in self.files.get(repo, {}):
            return self.send_file(req, filename, self.files[repo][filename], body)
        if filename != "config.json" or repo not in self.repos:
            return self.error(req, 404, "EntryNotFound", body)
        data = self.repos[repo]
        etag = hashlib.sha256(data).hexdigest()
        req.send_response(200)
        req.send_header("Content-Type", "application/json")
        req.send_header("Content-Length", str(len(data)))
        req.send_header("ETag", f'"{etag}"')
        req.send_header("X-Repo-Commit", COMMIT)
        req.end_headers()
        if body:
            try:
                req.wfile.write(data)
            except OSError:  # the client stopped reading (a body past kvplan's limit)
                pass

    def flood(self, req: BaseHTTPRequestHandler) -> None:
        """A 200 with an ETag and a commit but no Content-Length; the GET body runs on until the client hangs up."""
        req.send_response(200)
        req.send_header("Content-Type", "application/json")
        req.send_header("ETag", '"flood"')
        req.send_header("X-Repo-Commit", COMMIT)
        req.end_headers()
        if req.command == "HEAD":
            return
        block = b" " * (1 << 20)
        try:
            while self.sent_bytes < self.FLOOD_BYTES and not self.closing.is_set():
                req.wfile.write(block)
                self.sent_bytes += len(block)
        except OSError:
            pass
        req.close_connection = True

    def model_info(self, req: BaseHTTPRequestHandler, rest: str, body: bool) -> None:
        repo = rest.split("/revision/")[0]
        if repo not in self.repos and repo not in self.files:
            return self.error(req, 401, "RepoNotFound", body)
        names = (["config.json"] if repo in self.repos else []) + sorted(self.files.get(repo, {}))
        payload = json.dumps({"id": repo, "sha": COMMIT, "siblings": [{"rfilename": n} for n in names]}).encode()
        req.send_response(200)
        req.send_header("Content-Type", "application/json")
        req.send_header("Content-Length", str(len(payload)))
        req.end_headers()
        if body:
            req.wfile.write(payload)

    def send_file(self, req: BaseHTTPRequestHandler, name: str, data: bytes, body: bool) -> None:
        spec = req.headers.get("Range", "")
        if not spec.startswith("bytes="):
            req.send_response(200)
            req.send_header("Content-Length", str(len(data)))
            req.send_header("ETag", f'"{hashlib.sha256(data).hexdigest()}"')  # hf_hub_download needs both
            req.send_header("X-Repo-Commit", COMMIT)
            req.end_headers()
            if body:
                req.wfile.write(data)
            return
        first, _, last = spec.removeprefix("bytes=").partition("-")
        start, end = int(first), min(int(last) if last else len(data) - 1, len(data) - 1)
        if start >= len(data):
            req.send_response(416)
            req.send_header("Content-Range", f"bytes */{len(data)}")
            req.send_header("Content-Length", "0")
            req.end_headers()
            return
        self.ranges.append((name, start, end))
        chunk = data[start:end + 1]
        req.send_response(206)
        req.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
        req.send_header("Content-Length", str(len(chunk)))
        req.send_header("X-Repo-Commit", COMMIT)
        req.end_headers()
        if body:
            req.wfile.write(chunk)

    def error(self, req: BaseHTTPRequestHandler, status: int, code: str, body: bool) -> None:
        payload = json.dumps({"error": code}).encode()
        req.send_response(status)
        req.send_header("X-Error-Code", code)
        req.send_header("X-Error-Message", code)
        req.send_header("Content-Type", "application/json")
        req.send_header("Content-Length", str(len(payload)))
        req.end_headers()
        if body:
            req.wfile.write(payload)

    def misbehave(self, req: BaseHTTPRequestHandler) -> None:
        fault = self.fault
        if fault == "hang":
            self.closing.wait(120)
            return
        if fault == "redirect":
            req.send_response(302)
            req.send_header("Location", req.path)
            req.send_header("Content-Length", "0")
            req.end_headers()
            return
        if fault in ("500", "503", "429", "403"):
            payload = b"{}"
            req.send_response(int(fault))
            if fault == "429":
                req.send_header("Retry-After", "1")
            req.send_header("Content-Type", "application/json")
            req.send_header("Content-Length", str(len(payload)))
            req.end_headers()
            req.wfile.write(payload)
            return
        if fault == "flood":
            return self.flood(req)
        data = next(iter(self.repos.values()), b"{}")
        req.send_response(200)
        req.send_header("Content-Type", "application/json")
        req.send_header("Content-Length", str(len(data) + 1000))
        req.send_header("ETag", '"' + hashlib.sha256(data).hexdigest() + '"')
        req.send_header("X-Repo-Commit", COMMIT)
        req.end_headers()
        if req.command == "HEAD":
            return
        if fault == "short":
            req.wfile.write(data[: len(data) // 2])
            req.wfile.flush()
            req.close_connection = True
            return
        for byte in data:  # trickle
            if self.closing.wait(1.0):
                return
            try:
                req.wfile.write(bytes([byte]))
                req.wfile.flush()
            except OSError:
                return
