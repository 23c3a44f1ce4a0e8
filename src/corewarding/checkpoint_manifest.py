"""A local checkpoint's ``manifest.json``: the size and SHA-256 of every other file, written last.

The trainer writes it, and every reader checks a checkpoint against it before loading (resume, evaluation,
publishing), so a partial copy or changed bytes are caught. Light on purpose: no torch, so readers that only list or
verify checkpoints need not import the training code. ``CheckpointError`` is what a reader raises for a checkpoint it
cannot use.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from fnmatch import fnmatch
from pathlib import Path

from corewarding.errors import ExpectedError
from corewarding.files import file_sha256

MANIFEST = "manifest.json"


class CheckpointError(ExpectedError, RuntimeError):
    """The run folder has checkpoints but none is complete and readable, so it can be neither resumed nor restarted
    without losing them (or, for a reader, the checkpoint asked for is not the one that was written)."""


def write_manifest(folder: Path, threads: int = 1) -> None:
    """Record the size and SHA-256 of every file under ``folder``, last and atomically (temporary file, rename).

    ``threads`` files are hashed at once (hashlib releases the GIL): a verl save holds one shard per rank."""
    paths = [p for p in sorted(folder.rglob("*")) if p.is_file() and p.name != MANIFEST and not p.name.startswith(".")]
    with ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
        digests = list(pool.map(file_sha256, paths))
    files = {
        p.relative_to(folder).as_posix(): {"size": p.stat().st_size, "sha256": digest}
        for p, digest in zip(paths, digests, strict=True)
    }
    tmp = folder / f".{MANIFEST}.tmp"
    tmp.write_text(json.dumps({"version": 1, "files": files}, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, folder / MANIFEST)


def manifest_problem(folder: Path, may_be_removed: Iterable[str] = ()) -> str | None:
    """What differs between ``folder`` and its manifest (a missing, resized or changed file); None when it matches.

    A listed file whose relative path matches one of the ``may_be_removed`` glob patterns may be missing (a later
    pass removes it on purpose, as verl's rotation removes older saves' optimiser state); if present it must match."""
    removable = tuple(may_be_removed)
    try:
        files = json.loads((folder / MANIFEST).read_text())["files"]
        entries = {str(rel): (int(e["size"]), str(e["sha256"])) for rel, e in files.items()}
    except FileNotFoundError:
        return f"{MANIFEST} is missing"
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        return f"{MANIFEST} is unreadable ({type(exc).__name__}: {exc})"
    for rel, (size, digest) in sorted(entries.items()):
        parts = Path(rel).parts
        if not parts or Path(rel).is_absolute() or ".." in parts:
            return f"{MANIFEST} names {rel!r}, outside its folder"
        path = folder / rel
        if path.is_symlink():
            return f"{rel} is a link (a checkpoint holds plain files only)"
        if not path.is_file():
            if any(fnmatch(rel, pattern) for pattern in removable) and not path.exists():
                continue
            return f"{rel} is missing"
        if path.stat().st_size != size:
            return f"{rel} has {path.stat().st_size} bytes, its manifest says {size}"
        if file_sha256(path) != digest:
            return f"{rel} does not match its SHA-256 in {MANIFEST}"
    return None
