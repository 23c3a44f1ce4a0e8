"""The store on a local disk, used without following a link: whoever can write the store could otherwise point one
of its folders or files at a file of the machine that syncs it (a token, a key) and have it copied into a run.

Every path is taken from the store's root, resolved once when the store is opened. A read opens each folder from the
root down with ``O_NOFOLLOW`` (so a link swapped in while it runs is refused too), a listing reads each folder through
such a descriptor and stops at MAX_DEPTH, and a write checks each existing part with ``lstat``, then creates its
folders and its file from the root down through such descriptors (``write``: a link swapped in between the check and
the write is refused, never followed) and moves the file into place by name in its folder. A link, a pipe,
a device, a file where a folder is expected, or a file with more than one name (a hard link) is refused with one line.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat

from corewarding.errors import ExpectedError
from corewarding.pipeline.store.run_files import MAX_DEPTH, too_deep

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # NONBLOCK: a planted pipe cannot hang the open
_REFUSED_OPEN = (errno.ELOOP, errno.ENOTDIR, errno.ENXIO)


class StoreError(ExpectedError, RuntimeError):
    """A store operation failed; the message names the store URL or the local path. (Defined in this, the store's
    lowest module, and imported from ``transport`` by everyone else.)"""


class LocalDisk:
    """Paths under ``root`` (already resolved) of the store at ``url`` (named in messages)."""

    def __init__(self, url: str, root: str) -> None:
        self.url, self.root = url, root

    def rel(self, path: str) -> str:
        """``path`` relative to the root (the root itself: empty)."""
        if path == self.root:
            return ""
        if not path.startswith(self.root + "/"):
            raise StoreError(f"artifact store {self.url}: {path} is not a path inside the store")
        return path[len(self.root) + 1 :]

    def parts(self, path: str) -> list[str]:
        """The names from the root down to ``path``."""
        rel = self.rel(path)
        return rel.split("/") if rel else []

    def link_refused(self, rel: str) -> StoreError:
        return StoreError(f"{self.url}: {rel} is a link or not a regular file; the store never follows one")

    def hard_link_refused(self, rel: str, names: int) -> StoreError:
        return StoreError(f"{self.url}: {rel} is a hard link ({names} names); the store never copies one")

    def check(self, path: str) -> None:
        """Refuse a link at any part of ``path`` below the root, a non-folder above its last part, or a last part that
        is neither a file nor a folder; parts that do not exist yet are fine (a write creates them)."""
        parts = self.parts(path)
        for i in range(len(parts)):
            rel = "/".join(parts[: i + 1])
            try:
                mode = os.lstat(f"{self.root}/{rel}").st_mode
            except FileNotFoundError:
                return
            last = i == len(parts) - 1
            if not (stat.S_ISDIR(mode) or (last and stat.S_ISREG(mode))):
                raise self.link_refused(rel)

    def _open(self, parts: list[str], flags: int) -> int:
        """A descriptor of root/parts (opened with ``flags``), the root and each folder below it opened from the one
        above without following a link."""
        fd: int | None = None
        try:
            for i, name in enumerate([self.root, *parts]):
                try:
                    child = os.open(name, flags if i == len(parts) else _DIR, dir_fd=fd)
                except OSError as exc:
                    if exc.errno in _REFUSED_OPEN:
                        raise self.link_refused("/".join(parts[:i]) or ".") from exc
                    raise
                if fd is not None:
                    os.close(fd)
                fd = child
        except BaseException:
            if fd is not None:
                os.close(fd)
            raise
        assert fd is not None  # the root, at least, was opened
        return fd

    def open_file(self, path: str) -> int:
        """A descriptor of the regular file ``path`` with one name (FileNotFoundError when absent)."""
        rel = self.rel(path)
        fd = self._open(self.parts(path), _FILE)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise self.link_refused(rel)
            if info.st_nlink > 1:
                raise self.hard_link_refused(rel, info.st_nlink)
            return fd
        except BaseException:
            os.close(fd)
            raise

    def _open_folder(self, parts: list[str]) -> int:
        """A descriptor of the folder root/parts, creating the missing ones, each from the one above without following
        a link (the root itself is made when missing, as a write always did; a work pool checks it exists first)."""
        os.makedirs(self.root, exist_ok=True)
        fd = os.open(self.root, _DIR)
        try:
            for i, name in enumerate(parts):
                try:
                    child = os.open(name, _DIR, dir_fd=fd)
                except FileNotFoundError:
                    with contextlib.suppress(FileExistsError):  # another writer made it meanwhile
                        os.mkdir(name, 0o777, dir_fd=fd)
                    child = os.open(name, _DIR, dir_fd=fd)
                except OSError as exc:
                    if exc.errno in _REFUSED_OPEN:
                        raise self.link_refused("/".join(parts[: i + 1])) from exc
                    raise
                os.close(fd)
                fd = child
        except BaseException:
            os.close(fd)
            raise
        return fd

    def write(self, path: str, source: bytes | str, temporary: str) -> None:
        """Write ``source`` (bytes, or a local file's path) to the store file ``path``: a new file ``temporary`` in its
        folder (opened through descriptors, never through a link), then renamed over ``path`` within that folder."""
        self.check(path)
        *folder, name = self.parts(path)
        dir_fd = self._open_folder(folder)
        try:
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644,
                         dir_fd=dir_fd)  # fmt: skip
            try:
                with os.fdopen(fd, "wb") as out:
                    if isinstance(source, bytes):
                        out.write(source)
                    else:
                        with open(source, "rb") as src:
                            shutil.copyfileobj(src, out, 2**20)
                os.rename(temporary, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)  # replaces the entry, follows nothing
            except BaseException:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(temporary, dir_fd=dir_fd)
                raise
        finally:
            os.close(dir_fd)

    def read(self, path: str) -> bytes:
        """The content of a store file (see open_file)."""
        with os.fdopen(self.open_file(path), "rb") as handle:
            return handle.read()

    def copy_to(self, path: str, local: str) -> None:
        """Copy a store file (see open_file) to a new local file."""
        with os.fdopen(self.open_file(path), "rb") as source, open(local, "xb") as dest:
            shutil.copyfileobj(source, dest, 2**20)

    def sizes(self, base: str) -> dict[str, int]:
        """Sizes of the files under ``base`` by relative path (empty when there is none), every folder read through a
        descriptor opened without following a link; a chain deeper than MAX_DEPTH is refused before it is entered."""
        self.check(base)
        top, where = self.parts(base), self.rel(base)
        found: dict[str, int] = {}
        pending: list[list[str]] = [[]]
        while pending:  # no recursion: a deep chain costs a list, never the stack
            sub = pending.pop()
            try:
                fd = self._open(top + sub, _DIR)
            except FileNotFoundError:
                if not sub:
                    return {}
                raise
            try:
                with os.scandir(fd) as entries:
                    listed = [(entry.name, entry.stat(follow_symlinks=False)) for entry in entries]
            finally:
                os.close(fd)
            for name, info in listed:
                rel = "/".join([*sub, name])
                if stat.S_ISDIR(info.st_mode):
                    if len(sub) + 1 > MAX_DEPTH:
                        raise StoreError(too_deep(f"{self.url}/{where}"))
                    pending.append([*sub, name])
                elif not stat.S_ISREG(info.st_mode):
                    raise self.link_refused(f"{where}/{rel}")
                elif info.st_nlink > 1:
                    raise self.hard_link_refused(f"{where}/{rel}", info.st_nlink)
                else:
                    found[rel] = info.st_size
        return found
