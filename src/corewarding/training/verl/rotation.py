"""Which verl checkpoints a run keeps: the newest ``trainer.max_actor_ckpt_to_keep`` saves whole (the teacher's shards
and ``data.pt`` with them), optimiser state for the newest only.

verl's own rotation removes only ``global_step_N/actor`` and remembers its saves in memory, so it leaves the
Co-rewarding-II teacher's shards and ``data.pt`` behind and forgets every save made before a resume. This pass runs
after a save is complete (verl has written ``latest_checkpointed_iteration.txt``), so the step a crash would resume
from is never touched. A Qwen3-8B save is 33 GB of fp32 model shards + 66 GB of AdamW state (+ 33 GB teacher); see
docs/checkpoints.md.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

from corewarding.run_folder import VERL_TRACKER, step_dirs

log = logging.getLogger(__name__)

OPTIM_GLOB = "optim_world_size_*_rank_*.pt"  # verl's FSDPCheckpointManager, one per rank


def latest_step(checkpoints_dir: Path) -> int | None:
    """The step verl recorded as its newest complete save; None without a readable record."""
    try:
        return int((checkpoints_dir / VERL_TRACKER).read_text().strip())
    except (OSError, ValueError):
        return None


def rotate(checkpoints_dir: Path, keep: int | None) -> list[Path]:
    """Remove the saves older than the newest ``keep`` (None: keep every save) and the optimiser state of every kept
    save but the newest; return what was removed. Saves newer than verl's record (an interrupted save) stay."""
    latest = latest_step(checkpoints_dir)
    if latest is None:
        log.warning("%s: no %s, so no checkpoint is rotated", checkpoints_dir, VERL_TRACKER)
        return []
    folders = step_dirs(checkpoints_dir)
    complete = sorted(step for step in folders if step <= latest)
    kept = complete[-keep:] if keep else complete
    removed = [folders[step] for step in complete if step not in kept]
    for folder in removed:
        shutil.rmtree(folder, ignore_errors=True)  # ranks on one node may race here: both outcomes are the same
    for step in kept[:-1]:
        for optim in sorted((folders[step] / "actor").glob(OPTIM_GLOB)):
            optim.unlink(missing_ok=True)
            removed.append(optim)
    if removed:
        log.info("checkpoints: kept steps %s, removed %d path(s)", kept, len(removed))
    return removed
