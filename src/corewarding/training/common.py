"""What both training backends share: the cell of a config, its training-config hash, its number of steps, and
what a finished run returns."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from corewarding.matrix import Cell, cell_from_config


@dataclass
class RunResult:
    """What a finished (or stopped) run leaves behind."""

    run_dir: Path
    steps: int
    seconds: float
    metrics: list[dict[str, Any]]


def cell_of(cfg: DictConfig) -> Cell:
    """The matrix cell a composed config trains: its method, base model and data set names, and its seed."""
    return cell_from_config(cfg)


def total_steps(cfg: DictConfig, n_rows: int) -> int:
    """``schedule.total_steps`` or floor(N / B) * epochs."""
    batch = int(cfg.grpo.train_batch_size)
    if n_rows < batch:
        raise ValueError(f"{n_rows} training rows is fewer than grpo.train_batch_size={batch}")
    return int(cfg.schedule.total_steps or (n_rows // batch) * int(cfg.schedule.epochs))


def training_config_hash(cfg: DictConfig) -> str:
    """A hash of everything that shapes training (not where files go or are published, not thread counts, not
    verl-only settings)."""
    ignored = ("paths", "torch_threads", "verl", "hub")
    container = OmegaConf.to_container(cfg)
    assert isinstance(container, dict)  # a composed config is a mapping
    relevant = {k: v for k, v in container.items() if k not in ignored}
    base = relevant.get("base_model")
    if isinstance(base, dict):  # shape (the verl plan's size) and gated (needs a Hub token): facts, not settings
        relevant["base_model"] = {k: v for k, v in base.items() if k not in ("shape", "gated")}
    return hashlib.sha256(json.dumps(relevant, sort_keys=True, default=str).encode()).hexdigest()[:16]
