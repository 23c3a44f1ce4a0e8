"""``dvc.lock`` kept whole through interrupts and kills.

DVC rewrites ``dvc.lock`` in place (open, truncate, write): a ``dvc`` process killed while it writes leaves the file
empty or cut, and every later ``dvc`` command then refuses the repository. So before each ``dvc`` call the pipeline
keeps a copy of the lock (in memory and in ``.dvc/tmp``); a call that was killed gets that copy back, and a lock
found broken before a call (a kill of both processes) is moved aside to ``dvc.lock.corrupt-<time>`` and replaced by
the last copy when there is one (DVC records the missing stages again when they next run).

Git tracks ``dvc.lock`` empty (DVC refuses a git-ignored lock); what DVC writes into it is this checkout's own record,
like ``params.yaml``, so before the first write git is told to leave it out of ``git status`` (``keep_local``).
"""

from __future__ import annotations

import logging
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import zc.lockfile
from ruamel.yaml import YAML
from voluptuous import Invalid

from corewarding.files import atomic_path

log = logging.getLogger(__name__)

LOCK = "dvc.lock"
BACKUP = Path(".dvc/tmp/corewarding-dvc.lock.backup")  # .dvc/tmp is DVC's own git-ignored scratch folder
REPO_LOCK = Path(".dvc/tmp/lock")  # the lock every dvc command takes (zc.lockfile)
BUSY_WAIT_S = 3.0  # as long as dvc itself waits for it


def keep_local(root: Path) -> None:
    """Mark a tracked ``dvc.lock`` skip-worktree, once: git then leaves this checkout's records out of ``git status``
    and ``git diff`` (undo: ``git update-index --no-skip-worktree dvc.lock``). Nothing happens outside a git checkout
    or where the lock is untracked."""
    git = ["git", "-C", str(root)]
    try:
        listed = subprocess.run([*git, "ls-files", "-v", "--", LOCK], capture_output=True, text=True, timeout=30)
        if listed.returncode == 0 and listed.stdout.startswith("H "):  # tracked, and not yet marked (S)
            subprocess.run([*git, "update-index", "--skip-worktree", "--", LOCK], check=True, timeout=30,
                           capture_output=True)  # fmt: skip
            log.info("%s: this checkout's DVC record; git leaves it out of `git status` (skip-worktree)", LOCK)
    except (OSError, subprocess.SubprocessError) as exc:
        log.warning("could not mark %s skip-worktree (%s); `git status` will list it as changed", LOCK, exc)


class RepoBusy(RuntimeError):
    """Another dvc process holds the repository lock."""


@contextmanager
def repo_lock(root: Path) -> Iterator[None]:
    """Hold DVC's repository lock inside, so a dvc process still writing ``dvc.lock`` (one that outlived a killed
    run) is never taken for a broken file; raise RepoBusy if it stays held for ``BUSY_WAIT_S``."""

    path = root / REPO_LOCK
    if not path.parent.is_dir():  # not a DVC repository (yet): nothing to guard
        yield
        return
    deadline = time.monotonic() + BUSY_WAIT_S
    while True:
        try:
            held = zc.lockfile.LockFile(str(path))
            break
        except zc.lockfile.LockError:
            if time.monotonic() > deadline:
                raise RepoBusy("another dvc process holds the repository lock (Unable to acquire lock)") from None
            time.sleep(0.2)
    try:
        yield
    finally:
        held.close()


def lock_problem(path: Path) -> str | None:
    """Why DVC would refuse the lock file at ``path`` (empty, not YAML, not DVC's lock schema); None if it is absent
    or usable."""
    from dvc.schema import COMPILED_LOCKFILE_SCHEMA  # dvc is imported only when a lock is checked (~0.2 s)

    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        return f"unreadable ({exc})"
    if not text.strip():
        return "empty"
    try:
        data = YAML(typ="safe", pure=True).load(text)
    except Exception as exc:  # ruamel raises many error types; each is a malformed file
        return f"not valid YAML ({str(exc).splitlines()[0]})"
    try:
        COMPILED_LOCKFILE_SCHEMA(data)
    except Invalid as exc:
        return f"not a DVC lock file ({exc})"
    return None


def _write(path: Path, content: bytes) -> None:
    with atomic_path(path, durable=True) as tmp:
        tmp.write_bytes(content)


def set_aside_if_broken(root: Path) -> Path | None:
    """Move a broken ``dvc.lock`` to ``dvc.lock.corrupt-<time>`` and put back the copy taken before the last dvc
    call, when that copy is usable; returns where the broken file went (None: nothing was wrong)."""
    lock, backup = root / LOCK, root / BACKUP
    problem = lock_problem(lock)
    if problem is None:
        return None
    aside = lock.with_name(f"{LOCK}.corrupt-{time.strftime('%Y%m%dT%H%M%S')}")
    for n in range(2, 1000):
        if not aside.exists():
            break
        aside = aside.with_name(f"{LOCK}.corrupt-{time.strftime('%Y%m%dT%H%M%S')}-{n}")
    lock.replace(aside)
    if backup.is_file() and lock_problem(backup) is None:
        _write(lock, backup.read_bytes())
        then = "restored the copy taken before the last dvc call"
    else:
        then = "dvc records its stages again as they run"
    log.warning("%s was %s: moved it to %s; %s", lock, problem, aside.name, then)
    return aside


def back_up(root: Path) -> bytes | None:
    """Keep a copy of ``dvc.lock`` (usable: call ``set_aside_if_broken`` first) for ``restore``; None: no lock."""
    lock, backup = root / LOCK, root / BACKUP
    try:
        content = lock.read_bytes()
    except FileNotFoundError:
        backup.unlink(missing_ok=True)  # a copy of an older lock must not come back over a newer state
        return None
    _write(backup, content)
    return content


def restore(root: Path, before: bytes | None, why: str) -> None:
    """Put ``dvc.lock`` back as it was before a dvc call (``before`` from ``back_up``; None: it did not exist)."""
    lock = root / LOCK
    if before is None:
        lock.unlink(missing_ok=True)
    else:
        _write(lock, before)
    log.warning("%s restored to its state before %s", lock, why)


def keep_whole(root: Path, before: bytes | None, returncode: int | None, what: str) -> None:
    """After a dvc call: if it was killed (by a signal: it may have been writing the lock) or left the lock broken,
    restore the lock of before the call. Stages that call recorded are recorded again when they next run. A call
    still running (``returncode`` None: left to finish) owns the lock: it is not touched."""
    lock = root / LOCK
    if returncode is None:
        return
    if returncode < 0:
        current = lock.read_bytes() if lock.is_file() else None
        if current != before:
            restore(root, before, f"{what} (killed by signal {-returncode})")
    elif lock_problem(lock) is not None:
        restore(root, before, f"{what} (it left {LOCK} broken)")
