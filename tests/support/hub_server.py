"""A small in-memory Hugging Face Hub for tests: the part of the Hub API that huggingface_hub 1.x uses to create a
repo and a branch, upload a folder of small files, list and download them.

Written from the requests huggingface_hub makes (``hf_api.py``, ``_commit_api.py``, ``_upload_pipeline.py``,
``file_download.py``): every file is answered ``"regular"`` at preupload (so no LFS or Xet storage is involved) and
arrives base64-encoded in the NDJSON commit body. Preupload answers each path's current git blob id as ``oid``,
which is how the client drops unchanged files and skips an empty commit.

Faults can be injected: the next N requests whose path matches a pattern answer a status (500, 404, ...) or have
their connection closed without a response, either unhandled or after the server applied them (a lost reply).
Requests are recorded (method, path, status, whether a token was sent); the Authorization header's value is never
stored.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import yaml

REPO_TYPES = {"models": "model", "datasets": "dataset", "spaces": "space"}
PREFIX = {"model": "", "dataset": "datasets/", "space": "spaces/"}
USER = "tester"


def git_blob_id(content: bytes) -> str:
    """The git object id of a blob: what the Hub reports as a regular file's oid."""
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


@dataclass
class Commit:
    oid: str
    parent: str | None
    title: str
    files: dict[str, bytes]
    changed: tuple[str, ...] = ()  # paths added, modified or deleted by this commit
    date: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="milliseconds")[:-6] + "Z")


def lineage(repo: Repo, oid: str | None) -> list[Commit]:
    """A commit and its ancestors, newest first."""
    out = []
    while oid is not None:
        out.append(repo.commits[oid])
        oid = repo.commits[oid].parent
    return out


@dataclass
class Repo:
    repo_type: str
    repo_id: str
    private: bool
    commits: dict[str, Commit] = field(default_factory=dict)
    branches: dict[str, str] = field(default_factory=dict)
    gated: bool = False  # set by a test: every request to the repo answers 403 GatedRepo, as for a user without access


@dataclass
class Fault:
    pattern: re.Pattern[str]
    remaining: int
    status: int | None  # None: drop the connection
    applied: bool = False  # handle the request first, then fail (the reply is lost, not the request)


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    status: int | None  # None: the connection was dropped
    authenticated: bool


class HubError(Exception):
    def __init__(self, status: int, message: str, code: str | None = None, **extra: Any) -> None:
        super().__init__(message)
        self.status, self.message, self.code, self.extra = status, message, code, extra


class FakeHub:
    """The repositories and the request log, shared by the handler threads."""

    def __init__(self, token: str | None) -> None:
        self._token = token
        self.lock = threading.Lock()
        self.repos: dict[tuple[str, str], Repo] = {}
        self.faults: list[Fault] = []
        self.requests: list[Request] = []
        self._counter = 0

    # ---- what tests use
    def fail_next(self, pattern: str, count: int = 1, status: int = 500) -> None:
        """The next ``count`` requests whose path matches ``pattern`` (a regex) answer ``status``."""
        with self.lock:
            self.faults.append(Fault(re.compile(pattern), count, status))

    def drop_next(self, pattern: str, count: int = 1) -> None:
        """The next ``count`` requests whose path matches ``pattern`` get their connection closed, unanswered."""
        with self.lock:
            self.faults.append(Fault(re.compile(pattern), count, None))

    def lose_reply_next(self, pattern: str, count: int = 1, status: int | None = None) -> None:
        """The next ``count`` matching requests are applied, then answered ``status`` with no body, or (None) their
        connection is closed unanswered: what a client sees when the server did the work but the reply was lost."""
        with self.lock:
            self.faults.append(Fault(re.compile(pattern), count, status, applied=True))

    def requests_to(self, pattern: str, method: str | None = None) -> list[Request]:
        with self.lock:
            return [r for r in self.requests if re.search(pattern, r.path) and method in (None, r.method)]

    def repo(self, repo_id: str, repo_type: str = "model") -> Repo:
        return self.repos[(repo_type, repo_id)]

    def files(self, repo_id: str, revision: str = "main", repo_type: str = "model") -> dict[str, bytes]:
        repo = self.repo(repo_id, repo_type)
        return dict(repo.commits[repo.branches[revision]].files)

    def history(self, repo_id: str, revision: str = "main", repo_type: str = "model") -> list[Commit]:
        """The commits of a branch, newest first."""
        repo = self.repo(repo_id, repo_type)
        return lineage(repo, repo.branches[revision])

    # ---- used by the handler
    def authorised(self, header: str | None) -> bool:
        if self._token is None:
            return True
        sent = (header or "").removeprefix("Bearer ").strip()
        return hmac.compare_digest(sent.encode(), self._token.encode())

    def take_fault(self, path: str) -> Fault | None:
        with self.lock:
            for fault in self.faults:
                if fault.remaining > 0 and fault.pattern.search(path):
                    fault.remaining -= 1
                    return fault
        return None

    def record(self, method: str, path: str, status: int | None, authenticated: bool) -> None:
        with self.lock:
            self.requests.append(Request(method, path, status, authenticated))

    def new_commit(self, repo: Repo, parent: str | None, title: str, files: dict[str, bytes]) -> Commit:
        self._counter += 1
        before = repo.commits[parent].files if parent else {}
        changed = tuple(sorted(p for p in set(before) | set(files) if before.get(p) != files.get(p)))
        seed = json.dumps([self._counter, parent, title, sorted((p, git_blob_id(c)) for p, c in files.items())])
        commit = Commit(hashlib.sha1(seed.encode()).hexdigest(), parent, title, files, changed)
        repo.commits[commit.oid] = commit
        return commit


class Handler(BaseHTTPRequestHandler):
    """Routes one request to the fake Hub; every answer carries a Content-Length (keep-alive works)."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out as separate writes; no 40 ms delayed-ACK stall
    server: HubServer

    def log_message(self, format: str, *args: Any) -> None:
        """Silent: requests are recorded in FakeHub.requests instead (the base class writes them to stderr)."""

    def do_GET(self) -> None:
        self._serve("GET")

    def do_HEAD(self) -> None:
        self._serve("HEAD")

    def do_POST(self) -> None:
        self._serve("POST")

    def _serve(self, method: str) -> None:
        hub = self.server.state
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        url = urlsplit(self.path)
        authenticated = bool(self.headers.get("Authorization"))
        fault = hub.take_fault(url.path)
        if fault is not None and fault.status is None and not fault.applied:
            hub.record(method, url.path, None, authenticated)
            self.close_connection = True
            return  # the socket closes with nothing written
        if fault is not None and not fault.applied:
            status, headers, payload = fault.status, {}, {"error": f"injected {fault.status}"}
        elif not hub.authorised(self.headers.get("Authorization")):
            status, headers = 401, {"X-Error-Message": "Invalid credentials in Authorization header"}
            payload = {"error": "Invalid credentials in Authorization header"}
        else:
            try:
                with hub.lock:
                    status, headers, payload = route(hub, self.server.url, method, url.path, url.query, body)
            except HubError as err:
                status, payload = err.status, {"error": err.message, **err.extra}
                headers = {"X-Error-Code": err.code} if err.code else {}
        if fault is not None:  # applied: the reply is replaced by a bare status or by nothing
            hub.record(method, url.path, fault.status, authenticated)
            self.close_connection = fault.status is None
            if fault.status is not None:
                self._answer(fault.status, {}, b"", head=method == "HEAD")
            return
        hub.record(method, url.path, status, authenticated)
        self._answer(int(status or 500), headers, payload, head=method == "HEAD")

    def _answer(self, status: int, headers: dict[str, str], payload: Any, head: bool) -> None:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(status)
        if not isinstance(payload, bytes):
            self.send_header("Content-Type", "application/json")
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if not head:
            self.wfile.write(data)


Answer = tuple[int, dict[str, str], Any]


def route(hub: FakeHub, base: str, method: str, path: str, query: str, body: bytes) -> Answer:
    """Dispatch on the path; raise HubError for an error answer."""
    parts = [unquote(p) for p in path.strip("/").split("/")]
    if path == "/api/whoami-v2":
        return 200, {}, {"type": "user", "name": USER, "auth": {"accessToken": {"role": "write"}}, "orgs": []}
    if path == "/api/repos/create" and method == "POST":
        return create_repo(hub, base, json.loads(body or b"{}"))
    if path == "/api/validate-yaml" and method == "POST":
        return validate_yaml(json.loads(body or b"{}"))
    if len(parts) >= 4 and parts[0] == "api" and parts[1] in REPO_TYPES:
        repo = find_repo(hub, REPO_TYPES[parts[1]], f"{parts[2]}/{parts[3]}")
        return repo_api(hub, base, repo, method, parts[4:], query, body)
    repo_type = "model"
    if parts and parts[0] in ("datasets", "spaces"):
        repo_type, parts = REPO_TYPES[parts[0]], parts[1:]
    if len(parts) >= 5 and parts[2] == "resolve" and method in ("GET", "HEAD"):
        repo = find_repo(hub, repo_type, f"{parts[0]}/{parts[1]}")
        return resolve(repo, parts[3], "/".join(parts[4:]))
    raise HubError(404, f"no route for {method} {path}")


def find_repo(hub: FakeHub, repo_type: str, repo_id: str) -> Repo:
    repo = hub.repos.get((repo_type, repo_id))
    if repo is None:
        raise HubError(404, f"Repository not found: {repo_id}", "RepoNotFound")
    if repo.gated:
        raise HubError(403, f"Access to model {repo_id} is restricted: you must accept its conditions", "GatedRepo")
    return repo


def head_of(repo: Repo, revision: str) -> Commit:
    oid = repo.branches.get(revision, revision if revision in repo.commits else None)
    if oid is None:
        raise HubError(404, f"Invalid rev id: {revision}", "RevisionNotFound")
    return repo.commits[oid]


def create_repo(hub: FakeHub, base: str, payload: dict[str, Any]) -> Answer:
    repo_type = payload.get("type") or "model"
    repo_id = f"{payload.get('organization') or USER}/{payload['name']}"
    url = f"{base}/{PREFIX[repo_type]}{repo_id}"
    if (repo_type, repo_id) in hub.repos:
        raise HubError(409, f"You already created this {repo_type} repo", url=url)
    repo = Repo(repo_type, repo_id, payload.get("visibility") == "private" or bool(payload.get("private")))
    first = hub.new_commit(repo, None, "initial commit", {".gitattributes": b"*.safetensors filter=lfs\n"})
    repo.branches["main"] = first.oid
    hub.repos[(repo_type, repo_id)] = repo
    return 200, {}, {"url": url, "name": repo_id, "id": first.oid}


def validate_yaml(payload: dict[str, Any]) -> Answer:
    match = re.match(r"^---\s*\n(.*?)\n---\s*\n", payload.get("content", ""), re.DOTALL)
    try:
        metadata = yaml.safe_load(match.group(1)) if match else {}
    except yaml.YAMLError as exc:
        return 400, {}, {"errors": [{"message": f"invalid YAML: {exc}"}], "warnings": []}
    if metadata is not None and not isinstance(metadata, dict):
        return 400, {}, {"errors": [{"message": "metadata must be a mapping"}], "warnings": []}
    return 200, {}, {"errors": [], "warnings": []}


def repo_api(hub: FakeHub, base: str, repo: Repo, method: str, rest: list[str], query: str, body: bytes) -> Answer:
    action = rest[0] if rest else None
    if action is None and method == "GET":
        return 200, {}, info(repo, head_of(repo, "main"))
    if action == "revision" and method == "GET":
        return 200, {}, info(repo, head_of(repo, rest[1]))
    if action == "refs" and method == "GET":
        branches = [{"name": n, "ref": f"refs/heads/{n}", "targetCommit": o} for n, o in sorted(repo.branches.items())]
        return 200, {}, {"branches": branches, "converts": [], "tags": [], "pullRequests": []}
    if action == "branch" and method == "POST":
        return create_branch(repo, rest[1], json.loads(body or b"{}"))
    if action == "preupload" and method == "POST":
        return preupload(repo, rest[1], json.loads(body))
    if action == "commit" and method == "POST":
        return commit(hub, base, repo, rest[1], query, body)
    if action == "paths-info" and method == "POST":
        paths = parse_qs(body.decode()).get("paths", [])
        return 200, {}, paths_info(head_of(repo, rest[1]), paths)
    if action == "tree" and method == "GET":
        recursive = parse_qs(query).get("recursive", ["false"])[0].lower() == "true"
        return 200, {}, tree(head_of(repo, rest[1]), "/".join(rest[2:]), recursive)
    if action == "commits" and method == "GET":
        commits = lineage(repo, head_of(repo, rest[1]).oid)
        listed = [{"id": c.oid, "title": c.title, "message": c.title, "authors": [], "date": c.date} for c in commits]
        return 200, {}, listed
    raise HubError(404, f"no route for {method} {'/'.join(rest)}")


def info(repo: Repo, head: Commit) -> dict[str, Any]:
    siblings = [{"rfilename": p, "size": len(c), "blobId": git_blob_id(c)} for p, c in sorted(head.files.items())]
    return {"id": repo.repo_id, "sha": head.oid, "private": repo.private, "siblings": siblings}


def create_branch(repo: Repo, name: str, payload: dict[str, Any]) -> Answer:
    if name in repo.branches:
        raise HubError(409, f"Reference already exists: refs/heads/{name}")
    repo.branches[name] = head_of(repo, payload.get("startingPoint") or "main").oid
    return 200, {}, {}


def preupload(repo: Repo, revision: str, payload: dict[str, Any]) -> Answer:
    files = head_of(repo, revision).files
    answers = []
    for item in payload.get("files", []):
        existing = files.get(item["path"])
        oid = git_blob_id(existing) if existing is not None else None
        answers.append({"path": item["path"], "uploadMode": "regular", "shouldIgnore": False, "oid": oid})
    return 200, {}, {"files": answers, "commitOid": head_of(repo, revision).oid}


def commit(hub: FakeHub, base: str, repo: Repo, revision: str, query: str, body: bytes) -> Answer:
    if parse_qs(query).get("create_pr"):
        raise HubError(400, "pull requests are not supported by the test server")
    if revision not in repo.branches:
        raise HubError(404, f"Invalid rev id: {revision}", "RevisionNotFound")
    head = repo.commits[repo.branches[revision]]
    files, title = dict(head.files), ""
    for line in body.splitlines():
        if not line.strip():
            continue
        item = json.loads(line)
        key, value = item["key"], item["value"]
        if key == "header":
            title = value.get("summary", "")
            if value.get("parentCommit") and value["parentCommit"] != head.oid:
                raise HubError(412, "parent commit is not the head of the branch")
        elif key == "file":
            files[value["path"]] = base64.b64decode(value["content"])
        elif key == "deletedFile":
            if value["path"] not in files:
                raise HubError(404, "A file with this name doesn't exist", "EntryNotFound")
            del files[value["path"]]
        elif key == "deletedFolder":
            files = {p: c for p, c in files.items() if not p.startswith(value["path"].rstrip("/") + "/")}
        else:
            raise HubError(400, f"operation {key!r} is not supported by the test server (regular files only)")
    new = hub.new_commit(repo, head.oid, title, files)
    repo.branches[revision] = new.oid
    url = f"{base}/{PREFIX[repo.repo_type]}{repo.repo_id}/commit/{new.oid}"
    return 200, {}, {"success": True, "commitOid": new.oid, "commitUrl": url, "pullRequestUrl": None}


def _entry(path: str, content: bytes) -> dict[str, Any]:
    return {"type": "file", "path": path, "size": len(content), "oid": git_blob_id(content)}


def paths_info(head: Commit, paths: list[str]) -> list[dict[str, Any]]:
    out = []
    for path in paths:
        if path in head.files:
            out.append(_entry(path, head.files[path]))
        elif any(p.startswith(path.rstrip("/") + "/") for p in head.files):
            out.append({"type": "directory", "path": path, "oid": hashlib.sha1(path.encode()).hexdigest()})
    return out


def tree(head: Commit, folder: str, recursive: bool) -> list[dict[str, Any]]:
    prefix = folder.rstrip("/") + "/" if folder else ""
    entries: dict[str, dict[str, Any]] = {}
    for path, content in sorted(head.files.items()):
        if not path.startswith(prefix):
            continue
        rel = path[len(prefix) :].split("/")
        for depth in range(1, len(rel)):
            sub = prefix + "/".join(rel[:depth])
            if recursive or depth == 1:
                entries.setdefault(
                    sub, {"type": "directory", "path": sub, "oid": hashlib.sha1(sub.encode()).hexdigest()}
                )
        if recursive or len(rel) == 1:
            entries[path] = _entry(path, content)
    if folder and not entries:
        raise HubError(404, f"{folder}: no such folder", "EntryNotFound")
    return list(entries.values())


def resolve(repo: Repo, revision: str, path: str) -> Answer:
    head = head_of(repo, revision)
    if path not in head.files:
        raise HubError(404, f"Entry not found: {path}", "EntryNotFound")
    content = head.files[path]
    etag = f'"{git_blob_id(content)}"'
    return 200, {"X-Repo-Commit": head.oid, "ETag": etag, "Content-Type": "application/octet-stream"}, content


class HubServer(ThreadingHTTPServer):
    """``with HubServer(token=...) as server:`` serves on 127.0.0.1 at ``server.url`` from a background thread;
    ``server.state`` holds the repositories, the request log and the fault injection."""

    daemon_threads = True

    def __init__(self, token: str | None = None) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.state = FakeHub(token)
        self.url = f"http://127.0.0.1:{self.server_address[1]}"
        self._thread = threading.Thread(target=self.serve_forever, args=(0.02,), name="hub-server", daemon=True)

    def __enter__(self) -> HubServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()
        self._thread.join(timeout=5)
