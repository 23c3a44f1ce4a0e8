"""The shared artifact store: run folders pushed by the workers that train them, pulled by whoever resumes or ingests.

On any fsspec filesystem, ``<url>/runs/<cell_id>/`` mirrors a run folder and its ``.manifest.json`` holds the size and
SHA-256 of each file pushed; ``<url>/leases/<cell_id>.json`` says who holds the cell. A file is copied unless the
store lists it at the local size and the manifest has its hash (local hashes are cached by size and mtime).
Only complete checkpoints travel (see run_files); pointers are read first and written last, on push and on pull, so a
reader never sees a pointer to missing files. Every file lands under a temporary name and is then moved into place.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fsspec.core import url_to_fs
from fsspec.implementations.local import LocalFileSystem

from corewarding.files import file_sha256
from corewarding.matrix import is_plain_name
from corewarding.pipeline.store.local_disk import LocalDisk, StoreError
from corewarding.pipeline.store.run_files import (
    MAX_DEPTH,
    local_files,
    newest_step,
    older,
    pointer_step,
    read_local,
    read_pointers,
    sync_order,
    too_deep,
    travels,
    write_local,
)

log = logging.getLogger(__name__)

MANIFEST = ".manifest.json"
STORE_SUBDIR = "corewarding"  # the store's folder under a DVC remote
_INLINE_LIMIT = 64 * 2**20  # files up to this size are read once, then hashed and uploaded from the same bytes


@dataclass(frozen=True)
class SyncSummary:
    """What one push or pull copied."""

    files: int
    bytes: int
    seconds: float

    def __str__(self) -> str:
        return f"{self.files} files ({self.bytes} bytes) in {self.seconds:.2f}s"


def _entry(data: bytes) -> dict[str, Any]:
    """A manifest entry: size and SHA-256."""
    return {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


class ArtifactStore:
    """Run folders under <url>/runs/<cell_id>/ on any fsspec filesystem (a local path, file://, s3://, gs://, ssh://)."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/") or url
        try:
            self.fs, root = url_to_fs(self.url)
        except (ImportError, ValueError) as exc:
            raise StoreError(f"artifact store {self.url}: cannot open its filesystem ({exc})") from exc
        self.root = root.rstrip("/") or root
        # A local store is resolved once and then used by that path, every part below it checked for links (see
        # local_disk): a link retargeted after opening cannot redirect it. Other filesystems have no links.
        self.disk: LocalDisk | None = None
        if isinstance(self.fs, LocalFileSystem):
            self.root = os.path.realpath(self.root)
            self.disk = LocalDisk(self.url, self.root)
        self._digests: dict[Path, tuple[tuple[int, int], str]] = {}
        self._lock = threading.Lock()  # one sync at a time through this object (the syncer thread and its owner)

    def __repr__(self) -> str:
        return f"ArtifactStore({self.url!r})"

    @property
    def resolved_url(self) -> str:
        """The URL to hand on (in jobs, to a worker's cell runs): a local store's resolved folder, so that a link
        retargeted after this store was opened moves nothing; other filesystems' URL as given."""
        return self.root if self.disk is not None else self.url

    def _run_path(self, cell_id: str) -> str:
        if not is_plain_name(cell_id):  # the matrix's rule; fullmatch: no trailing newline either
            raise StoreError(f"artifact store {self.url}: {cell_id!r} is not a valid cell id")
        return f"{self.root}/runs/{cell_id}"

    def _lease_path(self, cell_id: str) -> str:
        self._run_path(cell_id)
        return f"{self.root}/leases/{cell_id}.json"

    def _cat(self, path: str) -> bytes | None:
        try:
            if self.disk is not None:
                return self.disk.read(path)
            self._refuse_special(path, self.fs.info(path))
            return bytes(self.fs.cat_file(path))
        except FileNotFoundError:
            return None

    def _get(self, path: str, local: str) -> None:
        """Copy a store file to a new local file (a local store's without following a link, see local_disk)."""
        if self.disk is not None:
            self.disk.copy_to(path, local)
        else:
            self.fs.get_file(path, local)

    def _refuse_special(self, path: str, info: dict[str, Any]) -> None:
        """A link (or a pipe, a device) in the store is never followed: whoever can write the store could otherwise
        have a worker copy any of its files (a token, a key) into a run and push it back."""
        if info.get("islink") or info.get("type") not in ("file", "directory"):
            rel = path.removeprefix(self.root + "/")
            raise StoreError(f"{self.url}: {rel} is a link or not a regular file; the store never follows one")

    def _put(self, source: Path | bytes, dest: str) -> None:
        """Copy a local file (or bytes) to ``dest`` through a temporary name beside it, then move it into place."""
        parent, name = dest.rsplit("/", 1)
        tmp = f"{parent}/.{name}.tmp-{uuid.uuid4().hex[:8]}"
        if self.disk is not None:  # a local store: through descriptors, so a link swapped in is never followed
            self.disk.write(dest, source if isinstance(source, bytes) else str(source), tmp.rsplit("/", 1)[1])
            return
        self.fs.makedirs(parent, exist_ok=True)
        try:
            if isinstance(source, bytes):
                self.fs.pipe_file(tmp, source)
            else:
                self.fs.put_file(str(source), tmp)
            self.fs.mv(tmp, dest, recursive=False)
        except BaseException:
            if self.fs.exists(tmp):
                self.fs.rm_file(tmp)
            raise

    def _remote_sizes(self, base: str) -> dict[str, int]:
        """Sizes of the files under ``base`` by relative path (empty when there is none); a link, a hard link or a
        special file is refused, and so is a folder chain deeper than MAX_DEPTH."""
        if self.disk is not None:
            return self.disk.sizes(base)
        try:
            found = self.fs.find(base, detail=True, withdirs=True)  # folders too: a link to one is listed, not entered
        except FileNotFoundError:
            return {}
        prefix = base + "/"
        for path, info in found.items():
            self._refuse_special(path, info)
            if info.get("type") == "directory" and path.removeprefix(prefix).count("/") >= MAX_DEPTH:
                raise StoreError(too_deep(f"{self.url}/{base.removeprefix(self.root + '/')}"))
        return {
            p[len(prefix) :]: int(info["size"])
            for p, info in found.items()
            if p.startswith(prefix) and info.get("type") == "file"
        }

    def _read_manifest(self, base: str) -> dict[str, dict[str, Any]]:
        data = self._cat(f"{base}/{MANIFEST}")
        if data is None:
            return {}
        try:
            files = json.loads(data)["files"]
        except (ValueError, KeyError, TypeError):
            log.warning("%s/%s is unreadable; every file counts as changed", base, MANIFEST)
            return {}
        return files if isinstance(files, dict) else {}

    def _write_manifest(self, base: str, files: dict[str, dict[str, Any]]) -> None:
        self._put(json.dumps({"version": 1, "files": files}, sort_keys=True).encode(), f"{base}/{MANIFEST}")

    def _digest(self, path: Path) -> tuple[int, str]:
        """Size and SHA-256 of a local file, cached by (size, mtime)."""
        stat = path.stat()
        key = (stat.st_size, stat.st_mtime_ns)
        cached = self._digests.get(path)
        if cached is None or cached[0] != key:
            cached = (key, file_sha256(path))
            self._digests[path] = cached
        return stat.st_size, cached[1]

    # --- any file under the store (data files shared by the parent, cell reports) -------------------------------
    def _path(self, rel: str) -> str:
        if rel.startswith("/") or ".." in rel.split("/"):
            raise StoreError(f"artifact store {self.url}: {rel!r} is not a path inside the store")
        return f"{self.root}/{rel}"

    def read_bytes(self, rel: str) -> bytes | None:
        """The content of ``<url>/<rel>``, or None when absent."""
        return self._cat(self._path(rel))

    def write_bytes(self, rel: str, data: bytes) -> None:
        """Write ``<url>/<rel>`` atomically."""
        self._put(data, self._path(rel))

    def upload(self, local: Path, rel: str) -> None:
        """Copy a local file to ``<url>/<rel>`` atomically."""
        self._put(Path(local), self._path(rel))

    def download(self, rel: str, local: Path) -> None:
        """Copy ``<url>/<rel>`` to a local file through a temporary name beside it."""
        local.parent.mkdir(parents=True, exist_ok=True)
        tmp = local.with_name(f".{local.name}.tmp-{uuid.uuid4().hex[:8]}")
        try:
            if self.disk is None:  # a local store's file is checked as it is opened
                self._refuse_special(self._path(rel), self.fs.info(self._path(rel)))
            self._get(self._path(rel), str(tmp))
            os.replace(tmp, local)
        except FileNotFoundError as exc:
            raise StoreError(f"artifact store {self.url}: no file {rel}") from exc
        finally:
            tmp.unlink(missing_ok=True)

    def has_run(self, cell_id: str) -> bool:
        """Whether a push of this cell has completed at least once (its manifest exists)."""
        path = f"{self._run_path(cell_id)}/{MANIFEST}"
        try:
            if self.disk is not None:
                self.disk.check(path)
            return bool(self.fs.exists(path))
        except OSError as exc:
            raise StoreError(f"artifact store {self.url}: cannot check run {cell_id} ({exc})") from exc

    def _locked(self, what: str, transfer: Callable[[], tuple[int, int]]) -> SyncSummary:
        """Run a push or pull under the store's lock, timed; an OSError becomes a StoreError saying what failed."""
        start = time.monotonic()
        with self._lock:
            try:
                files, nbytes = transfer()
            except OSError as exc:
                raise StoreError(f"{what} failed: {exc}") from exc
        return SyncSummary(files, nbytes, time.monotonic() - start)

    def push_run(self, cell_id: str, run_dir: Path, *, cancel: threading.Event | None = None) -> SyncSummary:
        """Copy the run folder's new or changed files to the store, complete checkpoints first, pointers last.

        ``cancel`` (set by RunSyncer.stop) ends the push after the current file, leaving the pointers as they were.
        """
        run_dir = Path(run_dir)
        if not run_dir.is_dir():
            raise StoreError(f"{run_dir}: no run folder to push to {self.url}")
        base = self._run_path(cell_id)
        summary = self._locked(
            f"push of {run_dir} to {self.url}/runs/{cell_id}", lambda: self._push(base, run_dir, cancel)
        )
        log.info("pushed %s of %s to %s", summary, run_dir, base)
        return summary

    def _push(self, base: str, run_dir: Path, cancel: threading.Event | None) -> tuple[int, int]:
        pointers = read_pointers(lambda rel: read_local(run_dir, rel))  # before listing: the steps they name exist
        limit = newest_step(pointers)
        local = {rel: p for rel, p in local_files(run_dir).items() if travels(rel, limit)}
        remote = self._remote_sizes(base)
        manifest = self._read_manifest(base)
        before = dict(manifest)
        copied = nbytes = 0
        try:
            for rel in sorted(local, key=sync_order):
                if cancel is not None and cancel.is_set():
                    return copied, nbytes
                sent = self._push_file(base, rel, local[rel], remote, manifest)
                if sent is not None:
                    copied, nbytes = copied + 1, nbytes + sent
            for rel, data in pointers.items():
                entry = _entry(data)
                if remote.get(rel) != len(data) or manifest.get(rel) != entry:
                    self._replace(base, rel, data, manifest, entry)
                    copied, nbytes = copied + 1, nbytes + len(data)
        finally:
            if copied or manifest != before:
                self._write_manifest(base, manifest)
        return copied, nbytes

    def _push_file(
        self, base: str, rel: str, path: Path, remote: dict[str, int], manifest: dict[str, dict[str, Any]]
    ) -> int | None:
        """Upload one file unless the store holds the same content; the bytes copied (None: skipped)."""
        try:
            size, digest = self._digest(path)
            if remote.get(rel) == size and manifest.get(rel) == {"size": size, "sha256": digest}:
                return None
            if size <= _INLINE_LIMIT:  # small files change while training (metrics.jsonl): hash what is uploaded
                data = path.read_bytes()
                self._replace(base, rel, data, manifest, _entry(data))
                return len(data)
            self._replace(base, rel, path, manifest, {"size": size, "sha256": digest})
            return size
        except FileNotFoundError:
            if path.exists():
                raise
            log.warning("%s vanished during the push (an old checkpoint removed?); skipped", path)
            return None

    def _replace(
        self, base: str, rel: str, source: Path | bytes, manifest: dict[str, dict[str, Any]], entry: dict[str, Any]
    ) -> None:
        """Overwrite one store file; its stale manifest entry is dropped (and saved) first, so a crash never lies."""
        if manifest.pop(rel, None) is not None:
            self._write_manifest(base, manifest)
        self._put(source, f"{base}/{rel}")
        manifest[rel] = entry
        log.debug("pushed %s", rel)

    def pull_run(self, cell_id: str, run_dir: Path, checkpoints: bool = True) -> SyncSummary:
        """Download the store's new or changed files into run_dir, pointers last; local files are never deleted.

        ``checkpoints=False`` leaves out ``checkpoints/``. A local pointer is never moved back to an older step.
        """
        run_dir = Path(run_dir)
        base = self._run_path(cell_id)
        summary = self._locked(
            f"pull of {self.url}/runs/{cell_id} into {run_dir}", lambda: self._pull(base, run_dir, checkpoints)
        )
        log.info("pulled %s from %s into %s", summary, base, run_dir)
        return summary

    def _pull(self, base: str, run_dir: Path, checkpoints: bool) -> tuple[int, int]:
        pointers = read_pointers(lambda rel: self._cat(f"{base}/{rel}")) if checkpoints else {}
        remote = self._remote_sizes(base)
        if MANIFEST not in remote:
            raise StoreError(f"{self.url}: no run at {base} (nothing was pushed there)")
        manifest = self._read_manifest(base)
        limit = newest_step(pointers)
        copied = nbytes = 0
        for rel in sorted((r for r in remote if travels(r, limit, checkpoints)), key=sync_order):
            local, entry = run_dir / rel, manifest.get(rel)
            if self._same(local, remote[rel], entry):
                continue
            local.parent.mkdir(parents=True, exist_ok=True)
            tmp = local.parent / f".{local.name}.tmp-{uuid.uuid4().hex[:8]}"
            try:
                self._get(f"{base}/{rel}", str(tmp))
                os.replace(tmp, local)
            finally:
                tmp.unlink(missing_ok=True)
            log.debug("pulled %s", rel)
            copied, nbytes = copied + 1, nbytes + remote[rel]
        for rel, data in pointers.items():
            mine = read_local(run_dir, rel)
            if mine == data:
                continue
            if older(pointer_step(rel, data), pointer_step(rel, mine)):
                log.warning("%s names a newer step than the store's; kept", run_dir / rel)
                continue
            write_local(run_dir / rel, data)
            log.debug("pulled %s", rel)
            copied, nbytes = copied + 1, nbytes + len(data)
        return copied, nbytes

    def _same(self, local: Path, size: int, entry: dict[str, Any] | None) -> bool:
        """Whether a local file already holds the store file the manifest entry describes."""
        if entry is None or entry.get("size") != size or not local.is_file():
            return False
        return self._digest(local) == (size, entry.get("sha256"))

    def write_lease(self, cell_id: str, holder: dict[str, object]) -> None:
        """Record who holds the cell, with the time (epoch seconds), atomically."""
        path = self._lease_path(cell_id)
        payload = json.dumps({**holder, "time": time.time()}, sort_keys=True, default=str).encode()
        try:
            self._put(payload, path)
        except OSError as exc:
            raise StoreError(f"cannot write lease {self.url}/leases/{cell_id}.json: {exc}") from exc

    def read_lease(self, cell_id: str) -> dict[str, object] | None:
        """The cell's lease, or None when there is none or it cannot be read."""
        path = self._lease_path(cell_id)
        try:
            data = self._cat(path)
            value = json.loads(data) if data is not None else None
        except (OSError, ValueError) as exc:
            log.warning("lease %s is unreadable (%s); treated as absent", path, exc)
            return None
        return value if isinstance(value, dict) else None


def dvc_remote_url(repo_root: Path, name: str) -> str:
    """The URL of a DVC remote of the repository, from DVC's merged config (relative paths already absolute)."""
    from dvc.exceptions import NotDvcRepoError  # dvc: imported when used
    from dvc.repo import Repo  # dvc: imported when used

    try:
        with Repo(str(repo_root)) as repo:
            remotes = {key: dict(value) for key, value in repo.config["remote"].items()}
    except NotDvcRepoError as exc:
        raise StoreError(f"{repo_root}: not a DVC repository (needed to resolve the DVC remote {name!r})") from exc
    suffix = ""
    for _ in range(len(remotes) + 1):  # remote://other/path is a path under another remote, as DVC reads it
        if name not in remotes:
            known = ", ".join(sorted(remotes)) or "none"
            raise StoreError(f"DVC remote {name!r} is not configured in {repo_root}; known remotes: {known}")
        url = str(remotes[name]["url"]).rstrip("/") + suffix
        if not url.startswith("remote://"):
            return url
        name, _, rest = url.removeprefix("remote://").partition("/")
        suffix = f"/{rest}" if rest else ""
    raise StoreError(f"DVC remote {name!r} in {repo_root}: remote:// URLs form a cycle")


def store_from_config(url: str | None, dvc_remote: str | None, repo_root: Path) -> ArtifactStore | None:
    """The store at ``url``, else under ``<url of the DVC remote>/corewarding``, else None (no shared store)."""
    if url:
        return ArtifactStore(url)
    if dvc_remote:
        return ArtifactStore(f"{dvc_remote_url(repo_root, dvc_remote).rstrip('/')}/{STORE_SUBDIR}")
    return None
