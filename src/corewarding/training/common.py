"""What both training backends share: the cell of a config, its training-config hash, its number of steps, and
what a finished run returns."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from corewarding.matrix import Cell, cell_from_config
from corewarding.schemas import GrpoConfig, PathsConfig, ScheduleConfig, section_of


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
    batch, schedule = section_of(cfg, GrpoConfig).train_batch_size, section_of(cfg, ScheduleConfig)
    if n_rows < batch:
        raise ValueError(f"{n_rows} training rows is fewer than grpo.train_batch_size={batch}")
    return schedule.total_steps or (n_rows // batch) * schedule.epochs


_NOT_TRAINING = ("paths", "torch_threads", "verl", "hub")  # where files go or are published, threads, verl-only
_FACTS = ("shape", "gated")  # base_model.shape (the verl plan's size), .gated (needs a Hub token): facts, not settings


def training_config_hash(cfg: DictConfig) -> str:
    """A hash of everything that shapes training (not where files go or are published, not thread counts, not
    verl-only settings), independent of where the ``paths.*`` folders are: a value under one of them counts by its
    name inside it (``<paths.artifacts_dir>/tiny-model-sft0``), so a run folder moved with its artifacts (another
    mount point) resumes. A path outside them (a model folder of your own) counts as it is written."""
    container = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(container, dict)  # a composed config is a mapping
    return _digest(_relevant(_location_free(container, _path_roots(cfg))))


def legacy_training_config_hash(cfg: DictConfig) -> str:
    """The hash before it ignored where ``paths.*`` point (it held the resolved paths as written). Accepted on resume
    for one version, so a run folder written by the previous version resumes in place; drop it in the next one."""
    container = OmegaConf.to_container(cfg)
    assert isinstance(container, dict)
    return _digest(_relevant(container))


def accepted_config_hashes(cfg: DictConfig) -> tuple[str, str]:
    """The hashes a run folder of ``cfg`` may hold and still resume: ``training_config_hash``'s and, for one version,
    ``legacy_training_config_hash``'s."""
    return training_config_hash(cfg), legacy_training_config_hash(cfg)


def _relevant(container: dict[Any, Any]) -> dict[Any, Any]:
    relevant = {k: v for k, v in container.items() if k not in _NOT_TRAINING}
    base = relevant.get("base_model")
    if isinstance(base, dict):
        relevant["base_model"] = {k: v for k, v in base.items() if k not in _FACTS}
    return relevant


def _digest(relevant: dict[Any, Any]) -> str:
    return hashlib.sha256(json.dumps(relevant, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _path_roots(cfg: DictConfig) -> dict[str, Path]:
    """``paths.*`` as absolute folders by key. Made absolute without following links: a file DVC links into its
    cache still lies under its folder."""
    paths = asdict(section_of(cfg, PathsConfig))
    return {f"paths.{key}": Path(os.path.abspath(value)) for key, value in paths.items()}


def _location_free(value: Any, roots: dict[str, Path]) -> Any:
    """``value`` with every string naming a path under one of ``roots`` written relative to it, tagged with its key
    (the deepest root wins); bare words (no ``/``) are never paths, unless one is a root itself."""
    if isinstance(value, dict):
        return {k: _location_free(v, roots) for k, v in value.items()}
    if isinstance(value, list):
        return [_location_free(v, roots) for v in value]
    if not isinstance(value, str):
        return value
    path = Path(os.path.abspath(value))
    if "/" not in value and path not in roots.values():
        return value
    under = [(len(root.parts), key, root) for key, root in roots.items() if path.is_relative_to(root)]
    if not under:
        return value
    _, key, root = max(under)
    relative = path.relative_to(root).as_posix()
    return f"<{key}>" if relative == "." else f"<{key}>/{relative}"
