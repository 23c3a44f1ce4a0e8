"""A local checkpoint's ``manifest.json``: the size and SHA-256 of every other file, written last.

The trainer writes it, and every reader checks a checkpoint against it before loading (resume, evaluation,
publishing), so a partial copy or changed bytes are caught. Light on purpose: no torch, so readers that only list or
verify checkpoints need not import the training code. ``CheckpointError`` is what a reader raises for a checkpoint it
cannot use.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from corewarding.files import file_sha256

MANIFEST = "manifest.json"


class CheckpointError(RuntimeError):
    """The run folder has checkpoints but none is complete and readable, so it can be neither resumed nor restarted
    without losing them (or, for a reader, the checkpoint asked for is not the one that was written)."""


def write_manifest(folder: Path) -> None:
    """Record the size and SHA-256 of every file under ``folder``, last and atomically (temporary file, rename)."""
    files = {
        p.relative_to(folder).as_posix(): {"size": p.stat().st_size, "sha256": file_sha256(p)}
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != MANIFEST and not p.name.startswith(".")
    }
    tmp = folder / f".{MANIFEST}.tmp"
    tmp.write_text(json.dumps({"version": 1, "files": files}, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, folder / MANIFEST)


def manifest_problem(folder: Path) -> str | None:
    """What differs between ``folder`` and its manifest (a missing, resized or changed file); None when it matches."""
    try:
        files = json.loads((folder / MANIFEST).read_text())["files"]
        entries = {str(rel): (int(e["size"]), str(e["sha256"])) for rel, e in files.items()}
    except FileNotFoundError:
        return f"{MANIFEST} is missing"
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        return f"{MANIFEST} is unreadable ({type(exc).__name__}: {exc})"
    for rel, (size, digest) in sorted(entries.items()):
        path = folder / rel
        if not path.is_file():
            return f"{rel} is missing"
        if path.stat().st_size != size:
            return f"{rel} has {path.stat().st_size} bytes, its manifest says {size}"
        if file_sha256(path) != digest:
            return f"{rel} does not match its SHA-256 in {MANIFEST}"
    return None
