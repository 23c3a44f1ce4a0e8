"""Which files of a run folder travel to the shared store and back, and in what order (pure path rules).

A ``global_step_N`` folder is complete once a pointer names step N or a later one: the local backend renames each
step into place and then rewrites ``checkpoints/latest`` (``global_step_N``); verl writes a step in place and then
``checkpoints/latest_checkpointed_iteration.txt`` (``N``). Hidden paths (``.tmp_global_step_N``, bookkeeping) stay.
A step folder travels whole, its ``manifest.json`` (the local backend's per-file SHA-256) included, so a pulled
checkpoint is verified on resume exactly like the one that was pushed.
"""

from __future__ import annotations

import os
import re
import stat
import uuid
from collections.abc import Callable
from pathlib import Path

from corewarding.run_folder import CHECKPOINTS, LATEST, STEP_PREFIX, VERL_TRACKER

MAX_DEPTH = 32  # folders below a run folder (or its store copy) that a sync lists; a checkpoint file is ~6 deep


class NotARegularFile(OSError):
    """A link, pipe or device where a run file or folder is expected: the store never follows or copies one (a link
    in a run folder or in the store could read any file of the machine that syncs it). A hard link is refused too:
    the file has other names, maybe outside the folder (``.venv``'s or a key's), whose content would be copied."""


class TooDeep(OSError):
    """Folders nested deeper than MAX_DEPTH: not listed, so a planted chain cannot exhaust the stack or the clock."""


def too_deep(where: object) -> str:
    """The one line that refuses a folder chain deeper than MAX_DEPTH."""
    return f"{where}: folders nested deeper than {MAX_DEPTH} levels; refused"


def refuse_special(path: Path) -> None:
    """Raise ``NotARegularFile`` unless ``path`` is a regular file with one name or a real folder (not followed if a
    link)."""
    info = path.lstat()
    if not (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)):
        kind = "a link" if stat.S_ISLNK(info.st_mode) else "not a regular file"
        raise NotARegularFile(f"{path} is {kind}; run folders are synced without following links")
    if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
        raise NotARegularFile(f"{path} is a hard link ({info.st_nlink} names); the store never copies one")


POINTERS = (f"{CHECKPOINTS}/{LATEST}", f"{CHECKPOINTS}/{VERL_TRACKER}")
_STEP_FILE = re.compile(rf"^{CHECKPOINTS}/{STEP_PREFIX}(\d+)/")


def is_hidden(rel: str) -> bool:
    """Temporary folders and bookkeeping (any path part starting with ``.``) never travel."""
    return any(part.startswith(".") for part in rel.split("/"))


def pointer_step(rel: str, data: bytes | None) -> int | None:
    """The step a checkpoint pointer names (local: ``global_step_N``, verl: ``N``); None when absent or unreadable."""
    if data is None:
        return None
    text = data.decode("utf-8", "replace").strip()
    if rel.endswith(LATEST):
        text = text.removeprefix(STEP_PREFIX)
    return int(text) if text.isdigit() else None


def newest_step(pointers: dict[str, bytes]) -> int | None:
    """The newest complete step any pointer names."""
    steps = [s for rel, data in pointers.items() if (s := pointer_step(rel, data)) is not None]
    return max(steps, default=None)


def travels(rel: str, limit: int | None, checkpoints: bool = True) -> bool:
    """Whether a non-pointer file syncs: not hidden, and a step folder's file only when its step is <= ``limit``."""
    if is_hidden(rel) or rel in POINTERS or (not checkpoints and rel.startswith("checkpoints/")):
        return False
    match = _STEP_FILE.match(rel)
    return match is None or (limit is not None and int(match.group(1)) <= limit)


def older(step: int | None, than: int | None) -> bool:
    """Whether ``step`` is older than ``than`` (an absent step is older than any)."""
    return than is not None and (step is None or step < than)


def sync_order(rel: str) -> tuple[int, int, str]:
    """Checkpoint folders first (oldest step first), then the run's other files."""
    match = _STEP_FILE.match(rel)
    return (0, int(match.group(1)), rel) if match else (1, 0, rel)


def local_files(run_dir: Path) -> dict[str, Path]:
    """Every regular file of the folder by relative POSIX path, hidden folders not entered; a link, a hard link or a
    special file (outside the hidden paths) is refused (``NotARegularFile``), folders deeper than MAX_DEPTH too
    (``TooDeep``, before they are entered)."""
    found: dict[str, Path] = {}
    for root, dirs, files in os.walk(run_dir):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        if dirs and len(Path(root).relative_to(run_dir).parts) >= MAX_DEPTH:
            raise TooDeep(too_deep(run_dir))
        for name in dirs:  # os.walk lists a link to a folder here and does not enter it
            refuse_special(Path(root) / name)
        for name in files:
            path = Path(root) / name
            rel = path.relative_to(run_dir).as_posix()
            if not is_hidden(rel):
                refuse_special(path)
                found[rel] = path
    return found


def read_pointers(read: Callable[[str], bytes | None]) -> dict[str, bytes]:
    """The pointers ``read(rel)`` returns (None: absent) that name a step."""
    found = {}
    for rel in POINTERS:
        data = read(rel)
        if data is not None and pointer_step(rel, data) is not None:
            found[rel] = data
    return found


def read_local(run_dir: Path, rel: str) -> bytes | None:
    """The bytes of a run file, None when absent."""
    try:
        refuse_special(run_dir / rel)
        return (run_dir / rel).read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return None


def write_local(path: Path, data: bytes) -> None:
    """Write bytes through a temporary name in the same folder, then rename into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.tmp-{uuid.uuid4().hex[:8]}"
    tmp.write_bytes(data)
    os.replace(tmp, path)
