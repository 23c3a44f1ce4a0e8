"""Checkpoints of the local backend: model, optimiser, scheduler, teacher, RNG state and data position.

Each checkpoint is written to a temporary folder and renamed into place, so a killed run never leaves a half-written
``global_step_N``; ``latest`` names the newest one. Its last file is ``manifest.json``, the size and SHA-256 of every
other file, so a resume can tell a complete, intact checkpoint from one that lost files or had bytes changed since
(a partial copy, a full disk, a bad sync); ``resume_candidates`` yields only those, newest first.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import random
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError

from corewarding.config import ConfigError
from corewarding.training.errors import CheckpointError
from corewarding.training.run_record import file_sha256

log = logging.getLogger(__name__)

LATEST = "latest"
MANIFEST = "manifest.json"
STEP_DIR = re.compile(r"^global_step_(\d+)$")
# Files every local checkpoint holds besides its manifest; the weights are one file or a sharded index.
REQUIRED = ("trainer_state.json", "trainer.pt", "model/config.json", "model/tokenizer_config.json")
WEIGHTS = ("model/model.safetensors", "model/model.safetensors.index.json")


# What reading a damaged checkpoint raises (torch's zip reader, pickle, safetensors, JSON, a state dict of the wrong
# shape); ConfigError (a ValueError) is raised before any of it is read, so it is never mistaken for damage.
UNREADABLE = (OSError, ValueError, RuntimeError, EOFError, KeyError, TypeError, pickle.UnpicklingError, SafetensorError)


@dataclass
class TrainerState:
    """Where training stands: the last finished step (the data position follows from it and the seed)."""

    step: int
    total_steps: int
    config_hash: str = ""  # of the training-relevant config; a resume under another config is refused


def rng_state() -> dict[str, Any]:
    """Every generator sampling draws from: torch CPU and CUDA, Python, NumPy."""
    state = {"torch": torch.get_rng_state(), "python": random.getstate(), "numpy": np.random.get_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(
    checkpoints_dir: Path,
    state: TrainerState,
    model: torch.nn.Module,
    tokenizer: Any,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    teacher: torch.nn.Module | None = None,
) -> Path:
    """Write ``global_step_{step}`` atomically and point ``latest`` at it."""
    final = checkpoints_dir / f"global_step_{state.step}"
    tmp = checkpoints_dir / f".tmp_global_step_{state.step}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    model.save_pretrained(tmp / "model")
    tokenizer.save_pretrained(tmp / "model")
    torch.save(
        {"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(), "rng": rng_state()},
        tmp / "trainer.pt",
    )
    if teacher is not None:
        torch.save(teacher.state_dict(), tmp / "teacher.pt")
    (tmp / "trainer_state.json").write_text(json.dumps(state.__dict__))
    write_manifest(tmp)
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)
    pointer = checkpoints_dir / f".{LATEST}.tmp"
    pointer.write_text(final.name)
    pointer.replace(checkpoints_dir / LATEST)
    return final


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


def checkpoint_problem(folder: Path, teacher: bool) -> str | None:
    """Why ``folder`` is not a complete, intact checkpoint (a required file missing, a manifest mismatch); None when
    it is. A folder written before manifests existed is accepted unverified, with a warning."""
    required = [*REQUIRED, *(["teacher.pt"] if teacher else [])]
    missing = [rel for rel in required if not (folder / rel).is_file()]
    if not any((folder / rel).is_file() for rel in WEIGHTS):
        missing.append(WEIGHTS[0])
    if missing:
        return f"missing {', '.join(missing)}"
    if not (folder / MANIFEST).exists():
        log.warning("%s has no %s (written by an older version): its files cannot be verified", folder, MANIFEST)
        return None
    return manifest_problem(folder)


def step_folders(checkpoints_dir: Path) -> list[Path]:
    """Every ``global_step_N`` folder, newest first (temporary folders are hidden and never listed)."""
    found = [p for p in checkpoints_dir.glob("global_step_*") if p.is_dir() and STEP_DIR.match(p.name)]
    return sorted(found, key=lambda p: int(p.name.removeprefix("global_step_")), reverse=True)


def resume_candidates(checkpoints_dir: Path, teacher: bool) -> Iterator[Path]:
    """The complete checkpoints, newest first; each incomplete or damaged one is logged by path and passed over."""
    for folder in step_folders(checkpoints_dir):
        problem = checkpoint_problem(folder, teacher)
        if problem is None:
            yield folder
        else:
            log.warning("%s is not a complete checkpoint (%s); trying the one before it", folder, problem)


def load_trainer_state(path: Path) -> TrainerState:
    return TrainerState(**json.loads((path / "trainer_state.json").read_text()))


def restore(
    path: Path,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    teacher: torch.nn.Module | None = None,
) -> None:
    """Load optimiser, scheduler, teacher and RNG state (the model is loaded from ``path/model`` by the caller)."""
    blob = torch.load(path / "trainer.pt", weights_only=False, map_location="cpu")
    optimizer.load_state_dict(blob["optimizer"])
    scheduler.load_state_dict(blob["scheduler"])
    if teacher is not None:
        teacher.load_state_dict(torch.load(path / "teacher.pt", map_location="cpu"))
    set_rng_state(blob["rng"])


def resume(
    checkpoints_dir: Path,
    config_hash: str,
    policy: Any,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    teacher: torch.nn.Module | None = None,
) -> TrainerState | None:
    """Load the newest complete, readable checkpoint into the given objects and return its state; None when there is
    no checkpoint at all. Raises ConfigError for checkpoints of another configuration and CheckpointError when there
    are checkpoints but none can be used."""
    folders = step_folders(checkpoints_dir) if checkpoints_dir.is_dir() else []
    if not folders:
        return None
    for folder in resume_candidates(checkpoints_dir, teacher is not None):
        try:
            state = load_trainer_state(folder)
        except UNREADABLE as exc:
            log.warning("%s is unreadable (%s: %s); trying the one before it", folder, type(exc).__name__, exc)
            continue
        if state.config_hash != config_hash:
            raise ConfigError(
                f"{checkpoints_dir.parent} holds checkpoints of another configuration (its config.yaml); "
                "resume with the same overrides, or train into a new paths.runs_dir / --run-dir"
            )
        try:
            policy.load_state_dict(type(policy).from_pretrained(folder / "model", dtype=policy.dtype).state_dict())
            restore(folder, optimizer, scheduler, teacher)
        except UNREADABLE as exc:
            log.warning("%s is unreadable (%s: %s); trying the one before it", folder, type(exc).__name__, exc)
            continue
        return state
    raise CheckpointError(
        f"{checkpoints_dir.parent}: no complete checkpoint to resume from ({len(folders)} found, each incomplete or "
        f"damaged, see the warnings above); move {checkpoints_dir} aside to train from the start"
    )
