"""Push a publish folder to a Hub repo: create the repo (and a branch), then upload the folder as one commit.

Idempotent: huggingface_hub (1.x) asks the Hub for each file's current oid before committing and leaves out the
files that did not change; when none changed it makes no commit and answers the branch's head, so pushing an
unchanged folder again changes nothing. The repo mirrors the folder: remote files the folder no longer has are
deleted in the same commit (``.gitattributes`` excepted), and hidden bookkeeping files are never uploaded.

A commit the Hub applied but whose answer was lost is not made again: each commit names its parent, so the client's
own re-sent POST is refused (412) instead of adding an empty commit, and before any retry the branch head is compared
with the folder (paths, sizes, git blob or LFS sha256 ids); when it already holds the folder, that head is the result.

The token comes from the environment (``HF_TOKEN``) or the Hugging Face cache (``hf auth login``), through
``huggingface_hub.get_token()``; it is handed to the client only, never logged, printed or written.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from huggingface_hub import CommitInfo, HfApi, RepoFile, constants, get_token
from huggingface_hub.errors import RepositoryNotFoundError, RevisionNotFoundError
from huggingface_hub.utils import DEFAULT_IGNORE_PATTERNS, filter_repo_objects

from corewarding.hub.errors import PublishInputError, PushError
from corewarding.hub.retry import with_retries

log = logging.getLogger(__name__)

T = TypeVar("T")

IGNORE_PATTERNS = [".*", "*/.*"]  # hidden bookkeeping (.manifest.json, .pushed.json) stays local
MIRROR = ["*"]  # remote files missing from the folder are deleted in the same commit
KEPT = {".gitattributes"}  # remote files the mirror never deletes
PARENT_MOVED = 412  # the Hub's answer to a commit whose parentCommit is no longer the branch head


@dataclass(frozen=True)
class PushResult:
    """Where a folder went: the repo, the revision, its head commit after the push, and whether that is new."""

    repo_id: str
    repo_type: str
    revision: str
    commit: str
    created_commit: bool
    endpoint: str


def resolve_endpoint(endpoint: str | None = None) -> str:
    """The Hub URL: the argument, else ``$HF_ENDPOINT`` (read now, not at import), else huggingface_hub's default."""
    return (endpoint or os.environ.get("HF_ENDPOINT") or constants.ENDPOINT).rstrip("/")


def resolve_token(token: str | None = None) -> str:
    """The token to push with: the argument (library callers), else ``HF_TOKEN``, else the cached login."""
    found = token or get_token()
    if not found:
        raise PushError("no Hugging Face token: set HF_TOKEN or run `hf auth login` (a token that can write)")
    return found


def check_online() -> None:
    if constants.is_offline_mode():
        raise PushError("HF_HUB_OFFLINE is set: pushing needs the Hub; unset HF_HUB_OFFLINE to push")


def push_folder(
    folder: Path,
    repo_id: str,
    *,
    repo_type: str = "model",
    revision: str | None = None,
    private: bool = False,
    endpoint: str | None = None,
    token: str | None = None,
    retries: int = 4,
    backoff: float = 2.0,
    commit_message: str | None = None,
) -> PushResult:
    """Upload ``folder`` to ``repo_id`` at ``revision`` (a branch, created from ``main`` when missing; default main).

    Each Hub call is retried on transient errors; a refusal (401, 403, 404, ...) raises PushError at once.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise PublishInputError(f"{folder}: no such folder to push")
    check_online()
    secret = resolve_token(token)
    url = resolve_endpoint(endpoint)
    api = HfApi(endpoint=url, token=secret)
    branch = revision or constants.DEFAULT_REVISION

    def retried(what: str, call: Callable[[], T], retry_status: Collection[int] = ()) -> T:
        where = f"{what} {repo_id}@{branch}"
        return with_retries(where, call, retries=retries, backoff=backoff, secret=secret, retry_status=retry_status)

    visibility = True if private else None  # None: the Hub's default for the namespace
    retried("create repo", lambda: api.create_repo(repo_id, repo_type=repo_type, private=visibility, exist_ok=True))
    if branch != constants.DEFAULT_REVISION:
        retried("create branch", lambda: api.create_branch(repo_id, branch=branch, repo_type=repo_type, exist_ok=True))
    before = retried("read head of", lambda: _head(api, repo_id, repo_type, branch))
    tries = 0

    def upload() -> str:
        nonlocal tries
        parent = before
        if tries:  # the last try may have committed although its answer never came
            parent = _head(api, repo_id, repo_type, branch)
            if head_holds_folder(api, repo_id, repo_type, parent, folder):
                log.info("%s@%s: head %s already holds %s; not committing again", repo_id, branch, parent, folder)
                return parent
        tries += 1
        info = api.upload_folder(
            repo_id=repo_id,
            folder_path=folder,
            repo_type=repo_type,
            revision=branch,
            commit_message=commit_message or f"Publish {folder.name} with corewarding",
            ignore_patterns=list(IGNORE_PATTERNS),
            delete_patterns=list(MIRROR),
            parent_commit=parent,  # a re-sent commit that already landed is refused, not made twice
        )
        if not isinstance(info, CommitInfo):  # upload_folder returns a Future only with run_as_future=True
            raise PushError(f"upload to {repo_id}@{branch}: unexpected answer {type(info).__name__}")
        return str(info.oid)

    commit = retried("upload to", upload, retry_status={PARENT_MOVED})  # 412: our own re-sent commit, or another's
    created = commit != before
    log.info("%s@%s: %s %s", repo_id, branch, "new commit" if created else "unchanged, head", commit)
    return PushResult(repo_id, repo_type, branch, commit, created, url)


def _head(api: HfApi, repo_id: str, repo_type: str, revision: str) -> str:
    sha = api.repo_info(repo_id, repo_type=repo_type, revision=revision).sha
    if not sha:
        raise PushError(f"{repo_id}@{revision}: the Hub named no head commit")
    return str(sha)


def folder_files(folder: Path) -> dict[str, Path]:
    """The files ``upload_folder`` sends from ``folder``, by their path in the repo."""
    found = {p.relative_to(folder).as_posix(): p for p in sorted(folder.glob("**/*")) if p.is_file()}
    kept = filter_repo_objects(found, ignore_patterns=[*IGNORE_PATTERNS, *DEFAULT_IGNORE_PATTERNS])
    return {path: found[path] for path in kept}


def _digest(path: Path, algorithm: str, prefix: bytes = b"") -> str:
    digest = hashlib.new(algorithm, prefix)
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def same_content(local: Path, remote: RepoFile) -> bool:
    """Whether a local file is the remote one: size, then the LFS sha256 or else the git blob id."""
    size = local.stat().st_size
    if size != remote.size:
        return False
    if remote.lfs is not None:
        return _digest(local, "sha256") == remote.lfs.sha256
    return _digest(local, "sha1", b"blob %d\0" % size) == remote.blob_id


def head_holds_folder(api: HfApi, repo_id: str, repo_type: str, commit: str, folder: Path) -> bool:
    """Whether the repo at ``commit`` mirrors ``folder``: the same paths (``KEPT`` aside), with the same content."""
    tree = api.list_repo_tree(repo_id, repo_type=repo_type, revision=commit, recursive=True)
    remote = {e.path: e for e in tree if isinstance(e, RepoFile) and e.path not in KEPT}
    local = folder_files(folder)
    if set(remote) != set(local):
        return False
    sizes_match = all(local[p].stat().st_size == remote[p].size for p in local)  # cheap, before any hashing
    return sizes_match and all(same_content(local[p], remote[p]) for p in local)


def remote_head(
    repo_id: str,
    *,
    repo_type: str = "model",
    revision: str = "main",
    endpoint: str | None = None,
    token: str | None = None,
    retries: int = 4,
    backoff: float = 2.0,
) -> str | None:
    """The head commit of ``revision`` on the Hub, or None when the repo or the revision does not exist."""

    check_online()
    secret = resolve_token(token)
    api = HfApi(endpoint=resolve_endpoint(endpoint), token=secret)

    def head() -> str | None:
        try:
            return api.repo_info(repo_id, repo_type=repo_type, revision=revision).sha
        except (RepositoryNotFoundError, RevisionNotFoundError):
            return None

    return with_retries(f"read head of {repo_id}@{revision}", head, retries=retries, backoff=backoff, secret=secret)
