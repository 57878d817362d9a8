"""A local stand-in for the Hugging Face Hub, for download tests without the network.

Serves repositories defined in Python on the two endpoints a downloader uses, with the headers the
real Hub sends (what huggingface_hub 0.36's `model_info`, `hf_hub_download` and `snapshot_download`
read, and what our launcher reads):

* `GET /api/models/{repo}[/revision/{rev}][?blobs=true]`: `id`, `sha`, `pipeline_tag`, `private`,
  `gated`, `siblings[].rfilename` (+ `size`, `blobId`, `lfs{size,sha256,pointerSize}` with
  `blobs=true`).
* `HEAD|GET /{repo}/resolve/{rev}/{file}`: a regular file answers 200 with `ETag: "{git sha1}"`,
  `X-Repo-Commit`, `Content-Length`; an LFS file answers 302 to `/cdn/{sha256}` on this server with
  `X-Linked-Etag: "{sha256}"`, `X-Linked-Size`, `X-Repo-Commit`, `ETag` (the pointer's sha1).
* `HEAD|GET /cdn/{sha256}`: the LFS object, `ETag: "{sha256}"`.

Both GET endpoints honour `Range: bytes=N-` / `bytes=N-M` (206 + Content-Range; 416 past the end).
Errors carry `X-Error-Code` / `X-Error-Message` as the Hub's do: unknown repo 404 RepoNotFound (401
without a token, as the Hub hides repos from anonymous callers), private repo without the right
token 401, gated repo files 401 (no token) / 403 (token not granted) GatedRepo, unknown revision 404
RevisionNotFound, unknown file 404 EntryNotFound.

Fault injection, by file name: `drop_after[name] = n` closes the connection after n body bytes of
the first GET of that file; `corrupt.add(name)` serves it with one byte flipped; `api_sizes[name] =
n` lies about its size in the model info; `throttle[name] = bytes_per_second` serves it slowly;
`ignore_range.add(name)` answers 200 with the whole file to a Range request (as some proxies do);
`hidden.add(name)` lists it in the model info but answers 404 EntryNotFound for it.
`api_metadata = False` leaves sizes and hashes out of the model info (names only), so a client
must HEAD each file.
`requests` records every request (method, path, Range,
Authorization) so tests can assert that a resume asked for a range.
"""

from __future__ import annotations

import hashlib
import json
import socket
import sys
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LFS_SUFFIXES = (".safetensors", ".bin", ".gguf", ".pt", ".model")


def git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def lfs_pointer(data: bytes) -> bytes:
    return (
        b"version https://git-lfs.github.com/spec/v1\n"
        + f"oid sha256:{hashlib.sha256(data).hexdigest()}\nsize {len(data)}\n".encode()
    )


@dataclass
class HubFile:
    name: str
    data: bytes
    lfs: bool

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    @property
    def etag(self) -> str:
        """The blob name in the cache: sha256 for LFS files, git blob sha1 otherwise."""
        return self.sha256 if self.lfs else git_blob_sha1(self.data)


@dataclass
class HubRepo:
    repo_id: str
    private: bool = False
    gated: bool = False
    granted_tokens: set = field(default_factory=set)  # tokens that accepted a gated repo's licence
    pipeline_tag: str | None = "text-generation"
    commits: dict = field(default_factory=dict)  # sha -> {name: HubFile}
    refs: dict = field(default_factory=dict)  # branch or tag -> sha

    def commit(self, files: dict, ref: str = "main", lfs: set | None = None, tags=()) -> str:
        """Adds a commit holding `files` ({name: bytes}); `ref` (and `tags`) point at it."""
        parent = self.refs.get(ref, "")
        listing = "".join(f"{n}:{hashlib.sha1(d).hexdigest()}\n" for n, d in sorted(files.items()))
        sha = hashlib.sha1(f"{self.repo_id}\n{parent}\n{listing}".encode()).hexdigest()
        self.commits[sha] = {
            name: HubFile(name, data, name.endswith(LFS_SUFFIXES) if lfs is None else name in lfs)
            for name, data in files.items()
        }
        self.refs[ref] = sha
        for tag in tags:
            self.refs[tag] = sha
        return sha

    def resolve(self, revision: str) -> str | None:
        if revision in self.commits:
            return revision
        return self.refs.get(revision)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        """A client that hangs up mid-transfer is part of the tests, not an error."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class FakeHub:
    def __init__(self, valid_tokens=("hf_good", "hf_granted")):
        self.repos: dict[str, HubRepo] = {}
        self.valid_tokens = set(valid_tokens)
        self.drop_after: dict[str, int] = {}
        self.corrupt: set[str] = set()
        self.api_sizes: dict[str, int] = {}
        self.throttle: dict[str, int] = {}
        self.hidden: set[str] = set()
        self.ignore_range: set[str] = set()
        self.api_metadata = True
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._url: str | None = None
        self._thread: threading.Thread | None = None

    # ---- set-up -------------------------------------------------------------------------------

    def add_repo(self, repo_id: str, **kw) -> HubRepo:
        repo = HubRepo(repo_id, **kw)
        self.repos[repo_id] = repo
        return repo

    @property
    def url(self) -> str:
        """The base URL (kept after stop(): it then refuses connections, as a Hub that is down)."""
        assert self._url is not None, "start() first"
        return self._url

    def start(self) -> "FakeHub":
        self._server = _Server(("127.0.0.1", 0), _make_handler(self))
        host, port = self._server.server_address[:2]
        self._url = f"http://{host}:{port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # ---- what tests assert on -----------------------------------------------------------------

    def gets(self, name: str) -> list[dict]:
        """GET requests that fetched `name` (its resolve URL or, for LFS files, its CDN URL)."""
        return [r for r in self.requests if r["method"] == "GET" and r.get("file") == name]

    def file_requests(self) -> list[dict]:
        return [r for r in self.requests if r.get("file") is not None]

    # ---- lookups ------------------------------------------------------------------------------

    def _find_lfs(self, sha256: str) -> HubFile | None:
        for repo in self.repos.values():
            for files in repo.commits.values():
                for f in files.values():
                    if f.lfs and f.sha256 == sha256:
                        return f
        return None

    def _take_drop(self, name: str) -> int | None:
        with self._lock:
            return self.drop_after.pop(name, None)


def _make_handler(hub: FakeHub):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):  # quiet
            pass

        # ---- helpers --------------------------------------------------------------------------

        def _token(self) -> str | None:
            auth = self.headers.get("Authorization", "")
            return auth[len("Bearer ") :] if auth.startswith("Bearer ") else None

        def _record(self, **extra):
            entry = {
                "method": self.command,
                "path": self.path,
                "range": self.headers.get("Range"),
                "authorization": self.headers.get("Authorization"),
            }
            entry.update(extra)
            with hub._lock:
                hub.requests.append(entry)
            return entry

        def _error(self, status: int, code: str | None, message: str):
            body = json.dumps({"error": message}).encode()
            self.send_response(status)
            if code:
                self.send_header("X-Error-Code", code)
            self.send_header("X-Error-Message", message)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _repo_access(self, repo_id: str, files: bool) -> HubRepo | None:
            """The repo, or None after answering with the Hub's refusal."""
            repo = hub.repos.get(repo_id)
            token = self._token()
            if repo is None:
                if token is None:
                    self._error(401, "RepoNotFound", "Repository not found")
                else:
                    self._error(404, "RepoNotFound", "Repository not found")
                return None
            if repo.private and token not in hub.valid_tokens:
                if token is None:
                    self._error(401, "RepoNotFound", "Repository not found")
                else:
                    self._error(401, None, "Invalid credentials in Authorization header")
                return None
            if repo.gated and files:
                if token is None:
                    self._error(
                        401,
                        "GatedRepo",
                        f"Access to model {repo_id} is restricted. You must have access to it "
                        "and be authenticated to access it. Please log in.",
                    )
                    return None
                if token not in repo.granted_tokens:
                    self._error(
                        403,
                        "GatedRepo",
                        f"Access to model {repo_id} is restricted and you are not in the "
                        "authorized list. Visit https://huggingface.co/"
                        f"{repo_id} to ask for access.",
                    )
                    return None
            return repo

        def _send_bytes(self, data: bytes, headers: dict, name: str):
            """200 or 206 per the Range header, with the fault injections of `name`."""
            if name in hub.corrupt and data:
                data = bytes([data[0] ^ 0xFF]) + data[1:]
            total = len(data)
            start, end = 0, total - 1
            status = 200
            rng = self.headers.get("Range")
            if rng and rng.startswith("bytes=") and name not in hub.ignore_range:
                first, _, last = rng[len("bytes=") :].partition("-")
                start = int(first) if first else 0
                end = min(int(last), total - 1) if last else total - 1
                if start >= total:
                    self.send_response(416)
                    self.send_header("Content-Range", f"bytes */{total}")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                status = 206
            body = data[start : end + 1]
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Accept-Ranges", "bytes")
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(len(body)))
            if status == 206:
                self.send_header("Content-Range", f"bytes {start}-{end}/{total}")
            self.end_headers()
            if self.command == "HEAD":
                return
            drop = hub._take_drop(name)
            if drop is not None and drop < len(body):
                self.wfile.write(body[:drop])
                self.wfile.flush()
                self.close_connection = True
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                return
            rate = hub.throttle.get(name)
            if rate:
                step = max(1, rate // 20)
                for i in range(0, len(body), step):
                    self.wfile.write(body[i : i + step])
                    self.wfile.flush()
                    time.sleep(0.05)
                return
            self.wfile.write(body)

        # ---- routes ---------------------------------------------------------------------------

        def do_HEAD(self):
            self._route()

        def do_GET(self):
            self._route()

        def _route(self):
            parsed = urllib.parse.urlsplit(self.path)
            path = parsed.path
            if path.startswith("/api/models/"):
                self._record()
                return self._model_info(path[len("/api/models/") :], parsed.query)
            if path.startswith("/cdn/"):
                sha = path[len("/cdn/") :]
                f = hub._find_lfs(sha)
                self._record(file=f.name if f else None)
                if f is None:
                    return self._error(404, None, "not found")
                return self._send_bytes(f.data, {"ETag": f'"{f.sha256}"'}, f.name)
            if "/resolve/" in path:
                repo_id, _, rest = path[1:].partition("/resolve/")
                revision, _, name = rest.partition("/")
                revision = urllib.parse.unquote(revision)
                name = urllib.parse.unquote(name)
                entry = self._record()
                return self._resolve(urllib.parse.unquote(repo_id), revision, name, entry)
            self._record()
            self._error(404, None, "not found")

        def _model_info(self, rest: str, query: str):
            if "/revision/" in rest:
                repo_id, _, revision = rest.partition("/revision/")
                revision = urllib.parse.unquote(revision)
            else:
                repo_id, revision = rest, "main"
            repo = self._repo_access(repo_id, files=False)
            if repo is None:
                return
            sha = repo.resolve(revision)
            if sha is None:
                return self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
            blobs = urllib.parse.parse_qs(query).get("blobs", ["false"])[0].lower() == "true"
            siblings = []
            for name, f in sorted(repo.commits[sha].items()):
                s = {"rfilename": name}
                if blobs and hub.api_metadata:
                    size = hub.api_sizes.get(name, len(f.data))
                    if f.lfs:
                        pointer = lfs_pointer(f.data)
                        s["size"] = size
                        s["blobId"] = git_blob_sha1(pointer)
                        s["lfs"] = {"size": size, "sha256": f.sha256, "pointerSize": len(pointer)}
                    else:
                        s["size"] = size
                        s["blobId"] = git_blob_sha1(f.data)
                siblings.append(s)
            body = {
                "_id": hashlib.md5(repo.repo_id.encode()).hexdigest()[:24],
                "id": repo.repo_id,
                "modelId": repo.repo_id,
                "author": repo.repo_id.split("/")[0],
                "sha": sha,
                "lastModified": "2024-01-01T00:00:00.000Z",
                "createdAt": "2024-01-01T00:00:00.000Z",
                "private": repo.private,
                "gated": "manual" if repo.gated else False,
                "disabled": False,
                "downloads": 0,
                "likes": 0,
                "library_name": "transformers",
                "tags": ["transformers", "safetensors", "llama"],
                "siblings": siblings,
            }
            if repo.pipeline_tag is not None:
                body["pipeline_tag"] = repo.pipeline_tag
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        def _resolve(self, repo_id: str, revision: str, name: str, entry: dict):
            repo = self._repo_access(repo_id, files=True)
            if repo is None:
                return
            sha = repo.resolve(revision)
            if sha is None:
                return self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
            f = repo.commits[sha].get(name)
            if f is None or name in hub.hidden:
                return self._error(404, "EntryNotFound", f'{name} does not exist on "{revision}"')
            if f.lfs:
                pointer = lfs_pointer(f.data)
                body = b"Found. Redirecting"
                self.send_response(302)
                # On the host the client asked for (a container reaches this server by another
                # address than 127.0.0.1), as the Hub's redirects name a host the client reaches.
                host = self.headers.get("Host") or hub.url.split("//", 1)[1]
                self.send_header("Location", f"http://{host}/cdn/{f.sha256}")
                self.send_header("X-Repo-Commit", sha)
                self.send_header("X-Linked-Etag", f'"{f.sha256}"')
                self.send_header("X-Linked-Size", str(len(f.data)))
                self.send_header("ETag", f'"{git_blob_sha1(pointer)}"')
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)
                return
            entry["file"] = name
            self._send_bytes(f.data, {"ETag": f'"{f.etag}"', "X-Repo-Commit": sha}, name)

    return Handler


if __name__ == "__main__":  # a manual check: python fake_hub.py, then curl the printed URL
    hub = FakeHub()
    hub.add_repo("org/demo").commit({"config.json": b"{}", "model.safetensors": b"\0" * 1000})
    hub.start()
    print(hub.url)
    while True:
        time.sleep(3600)
