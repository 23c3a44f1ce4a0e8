"""The one place that picks a training backend: ``cfg.backend`` is ``local`` (CPU or one GPU, our own GRPO loop) or
``verl`` (verl + vLLM on GPUs). Readers of a run (evaluation, publishing) reach training only through here."""

from __future__ import annotations

import logging
from pathlib import Path

from omegaconf import DictConfig

from corewarding.run_folder import HF_CONFIG, LOCAL_MODEL, checkpoints_dir, merged_dir, saved_checkpoints
from corewarding.training.common import RunResult
from corewarding.training.verl import merge
from corewarding.training.verl.launch import VerlLaunch, train_verl

log = logging.getLogger(__name__)

BACKENDS = ("local", "verl")


def train(
    cfg: DictConfig, run_dir: Path | None = None, progress: bool = True, trust_unverified: bool = False
) -> RunResult | VerlLaunch:
    """Train ``cfg``'s cell into ``run_dir`` (default ``{paths.runs_dir}/{cell_id}``) with its backend, resuming an
    interrupted run. The local backend returns its result (steps, metrics); verl returns its validated launch (its
    metrics are in the run folder). ``trust_unverified``: the local backend resumes from a checkpoint without a
    manifest."""
    if cfg.backend == "verl":
        return train_verl(cfg, run_dir)
    if cfg.backend != "local":
        raise ValueError(f"backend={cfg.backend!r}; expected one of {', '.join(BACKENDS)}")
    return train_local(cfg, run_dir, progress=progress, trust_unverified=trust_unverified)


def train_local(
    cfg: DictConfig, run_dir: Path | None = None, progress: bool = True, trust_unverified: bool = False
) -> RunResult:
    """Train ``cfg``'s cell with the local backend whatever ``cfg.backend`` says (the demo trains on CPU): its result
    (steps, metrics)."""
    from corewarding.training.local.trainer import train as local  # torch: kept off the light paths that import this

    return local(cfg, run_dir, progress=progress, trust_unverified=trust_unverified)


def to_hf_folder(run_dir: Path, step: int) -> Path:
    """A transformers-loadable folder for a saved step: a local checkpoint's ``model/`` as it is, a verl actor
    checkpoint merged once into ``hf/global_step_N`` (later calls read that folder)."""
    saved = saved_checkpoints(checkpoints_dir(run_dir))
    if step not in saved:
        raise FileNotFoundError(f"{checkpoints_dir(run_dir)}: no checkpoint for step {step}; saved: {sorted(saved)}")
    if saved[step].name == LOCAL_MODEL:
        return saved[step]
    merged = merged_dir(run_dir, step)
    if not (merged / HF_CONFIG).is_file():
        log.info("merging %s into %s", saved[step], merged)
        merge.merge_checkpoint(run_dir, step)
    return merged
