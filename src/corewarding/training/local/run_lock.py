"""An exclusive lock on a run folder for the whole of a training run, so two trainers never write one folder.

``fcntl.flock`` on ``.trainer.lock`` inside the folder: the kernel releases it when the holder exits or dies (even by
SIGKILL), so a lock never outlives its process. The holder writes its PID into the file, for the refusal's message.
The file is opened without following a link and without truncating (``open_lock_file``): a link planted in its place
is refused, never written through.
The file is hidden, so it never travels to the shared store. (flock is per machine; on NFS it may not lock.)
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from corewarding.files import open_lock_file
from corewarding.run_folder import LOCK
from corewarding.training.errors import RunInUseError, RunWriteError


def _holder(fd: int, wait_s: float = 1.0) -> str:
    """The PID in the lock file open at ``fd``; the holder writes it just after locking, so an empty file is read
    again briefly."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            text = os.pread(fd, 64, 0).decode(errors="replace").strip()
        except OSError:
            text = ""
        if text.isdigit() or time.monotonic() >= deadline:
            return text or "unknown"
        time.sleep(0.05)


@contextmanager
def run_lock(run_dir: Path) -> Iterator[None]:
    """Hold ``run_dir``'s lock inside the block; raise RunInUseError at once when another process holds it."""
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / LOCK
    fd = open_lock_file(path, RunWriteError)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunInUseError(
                f"{run_dir} is in use by another trainer (pid {_holder(fd)}); "
                "let it finish or stop it, then run the same command to resume"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        try:
            yield
        finally:
            os.ftruncate(fd, 0)  # still locked: a reader never sees a stale PID
    finally:
        os.close(fd)
