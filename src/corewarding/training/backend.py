"""The one place that picks a training backend: ``cfg.backend`` is ``local`` (CPU or one GPU, our own GRPO loop) or
``verl`` (verl + vLLM on GPUs)."""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig

from corewarding.training.common import RunResult
from corewarding.training.verl.launch import VerlLaunch, train_verl

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
    from corewarding.training.local import train as train_local  # torch: kept off the light paths that import this

    return train_local(cfg, run_dir, progress=progress, trust_unverified=trust_unverified)
