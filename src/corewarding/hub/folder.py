"""Publish folders: planned (generated texts + copied files), written atomically, fingerprinted by content.

A folder is built in a temporary sibling and renamed into place, so a failure leaves no half-written folder and an
older one untouched. Nothing in it depends on when it was built, so the same inputs give the same bytes; a folder
whose planned content equals what is already there is left as it is (status ``unchanged``). Hidden files (a name
starting with ``.``) are bookkeeping: the manifest and the push record. They are not part of the content and are
never uploaded.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from corewarding.files import file_sha256

log = logging.getLogger(__name__)

MANIFEST = ".manifest.json"
BUILT, UNCHANGED = "built", "unchanged"


@dataclass(frozen=True)
class PublishFolder:
    """A folder ready to upload: where it is, the repo it is for, its content fingerprint and files."""

    path: Path
    repo_id: str
    repo_type: str  # model | dataset
    step: int | None
    fingerprint: str
    files: tuple[str, ...]
    status: str  # built | unchanged


@dataclass
class FolderPlan:
    """What a publish folder will hold: generated files (bytes) and files copied from elsewhere, by relative path."""

    texts: dict[str, bytes] = field(default_factory=dict)
    copies: dict[str, Path] = field(default_factory=dict)

    def paths(self) -> list[str]:
        return sorted({*self.texts, *self.copies})


def is_hidden(rel: str) -> bool:
    """Bookkeeping files (any path part starting with ``.``): kept out of the fingerprint and the upload."""
    return any(part.startswith(".") for part in rel.split("/"))


def plan_manifest(plan: FolderPlan) -> dict[str, dict[str, Any]]:
    """Size and SHA-256 of every file the plan will write (copied files are hashed at their source)."""
    overlap = set(plan.texts) & set(plan.copies)
    if overlap:
        raise ValueError(f"a publish folder file is both generated and copied: {sorted(overlap)}")
    manifest: dict[str, dict[str, Any]] = {}
    for rel in plan.paths():
        if is_hidden(rel) or rel.startswith("/") or ".." in rel.split("/"):
            raise ValueError(f"not a publishable relative path: {rel!r}")
        if rel in plan.texts:
            data = plan.texts[rel]
            manifest[rel] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        else:
            source = plan.copies[rel]
            manifest[rel] = {"size": source.stat().st_size, "sha256": file_sha256(source)}
    return manifest


def fingerprint(manifest: dict[str, dict[str, Any]]) -> str:
    """``sha256:<hex>`` over the sorted (path, size, sha256) list: equal exactly when the contents are equal."""
    lines = "".join(f"{rel}\0{m['size']}\0{m['sha256']}\n" for rel, m in sorted(manifest.items()))
    return "sha256:" + hashlib.sha256(lines.encode()).hexdigest()


def content_files(folder: Path) -> list[str]:
    """The relative paths of the folder's content (hidden bookkeeping left out), sorted."""
    rels = (p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    return sorted(r for r in rels if not is_hidden(r))


def stored_manifest(folder: Path) -> dict[str, dict[str, Any]] | None:
    """The manifest a folder was written with, when its files are still those (names and sizes); else None."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text())["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(manifest, dict) or content_files(folder) != sorted(manifest):
        return None
    if any((folder / rel).stat().st_size != m.get("size") for rel, m in manifest.items()):
        return None
    return manifest


def write_folder(plan: FolderPlan, out: Path) -> tuple[str, str]:
    """Write ``plan`` to ``out`` atomically; ``(built | unchanged, fingerprint)``."""
    manifest = plan_manifest(plan)
    digest = fingerprint(manifest)
    if stored_manifest(out) == manifest:
        log.info("%s is up to date (%s)", out, digest)
        return UNCHANGED, digest
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    try:
        for rel in plan.paths():
            target = tmp / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            if rel in plan.texts:
                target.write_bytes(plan.texts[rel])
            else:
                shutil.copyfile(plan.copies[rel], target)
        record = {"fingerprint": digest, "files": manifest}
        (tmp / MANIFEST).write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
        umask = os.umask(0)
        os.umask(umask)
        tmp.chmod(0o777 & ~umask)  # mkdtemp makes 0700; give the folder the mode a plain mkdir would
        _swap_into_place(tmp, out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    log.info("wrote %s (%d files, %s)", out, len(manifest), digest)
    return BUILT, digest


def _swap_into_place(tmp: Path, out: Path) -> None:
    """Rename ``tmp`` to ``out``; an existing ``out`` is moved aside first and restored if the rename fails."""
    if not out.exists():
        os.rename(tmp, out)
        return
    old = out.with_name(f".{out.name}.old-{os.getpid()}")
    os.rename(out, old)
    try:
        os.rename(tmp, out)
    except BaseException:
        os.rename(old, out)
        raise
    shutil.rmtree(old, ignore_errors=True)
