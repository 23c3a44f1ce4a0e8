"""``corewarding checkpoint merge``: a verl FSDP checkpoint -> a Hugging Face model folder, with verl's own merger.

Reads ``{run_dir}/checkpoints/global_step_N/actor`` (the newest step unless one is named) and writes
``{run_dir}/hf/global_step_N`` through a temporary folder renamed into place, so a failed merge leaves nothing.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from corewarding.run_folder import VERL_ACTOR, checkpoints_dir, merged_dir, step_dir, verl_steps


def actor_checkpoint(run_dir: Path, step: int | None = None) -> tuple[int, Path]:
    """The step and actor folder to merge; a missing run, step or checkpoint is an error naming the path."""
    checkpoints = checkpoints_dir(run_dir)
    steps = verl_steps(checkpoints)
    if not steps:
        raise FileNotFoundError(f"{checkpoints}: no verl actor checkpoint (global_step_N/actor/fsdp_config.json)")
    if step is None:
        step = steps[-1]
    elif step not in steps:
        raise FileNotFoundError(f"{checkpoints}: no checkpoint for step {step}; saved steps: {steps}")
    return step, step_dir(checkpoints, step) / VERL_ACTOR


def merge_checkpoint(run_dir: Path, step: int | None = None, target: Path | None = None) -> Path:
    """Merge a run's FSDP checkpoint into a Hugging Face folder (bf16 safetensors + config + tokenizer)."""
    from verl.model_merger.base_model_merger import ModelMergerConfig  # verl: imported when used
    from verl.model_merger.fsdp_model_merger import FSDPModelMerger  # verl: imported when used

    from corewarding.training.verl.checkpoint_guard import check_pickles  # torch: off evaluation's import path

    step, actor = actor_checkpoint(run_dir, step)
    out = target or merged_dir(run_dir, step)
    if out.exists():
        raise FileExistsError(f"{out} exists; remove it or pass another --target")
    check_pickles(sorted(actor.glob("model_world_size_*_rank_*.pt")))  # verl's merger unpickles them unrestricted
    tmp = out.parent / f".{out.name}.tmp-{os.getpid()}"
    tmp.parent.mkdir(parents=True, exist_ok=True)
    config = ModelMergerConfig(
        operation="merge",
        backend="fsdp",
        local_dir=str(actor),
        target_dir=str(tmp),
        hf_model_config_path=str(actor / "huggingface"),
    )
    try:
        FSDPModelMerger(config).merge_and_save()
        os.replace(tmp, out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return out
