"""Checkpoints of the local backend: model, optimiser, scheduler, teacher, RNG state and data position.

Each checkpoint is written to a temporary folder and renamed into place, so a killed run never leaves a half-written
``global_step_N``; ``latest`` names the newest complete one.
"""

from __future__ import annotations

import json
import random
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

LATEST = "latest"


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
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)
    pointer = checkpoints_dir / f".{LATEST}.tmp"
    pointer.write_text(final.name)
    pointer.replace(checkpoints_dir / LATEST)
    return final


def latest_checkpoint(checkpoints_dir: Path) -> Path | None:
    """The newest complete checkpoint, or None."""
    pointer = checkpoints_dir / LATEST
    if not pointer.is_file():
        return None
    path = checkpoints_dir / pointer.read_text().strip()
    return path if (path / "trainer_state.json").is_file() else None


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
