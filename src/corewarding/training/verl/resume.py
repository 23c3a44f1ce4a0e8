"""Which verl save a launch resumes from: the newest complete, valid save, never a damaged one, never step 0 by
accident.

verl 0.9.1 resumes from the step its tracker (``latest_checkpointed_iteration.txt``) names, and when that folder is
gone it prints "Training from scratch" and starts over; a truncated or missing shard fails on a worker after two Ray
hops. So the driver writes a manifest into each step folder once the save is complete (``write_step_manifest``: the
size and SHA-256 of the actor shards, the teacher shards, ``data.pt`` and the extra state, written last), and before
verl starts the launch picks its step here (``choose``):

* the newest step whose manifest matches its files and that holds every rank's shards for this launch's world size;
* a newer step that fails is passed over with one line naming the step and the file, and set aside as
  ``global_step_N.incomplete`` (kept for inspection; the next save of that step starts in a clean folder);
* a run folder whose steps are all unusable stops with one line (``CheckpointError``); only when no save ever
  completed (no manifest, no tracker: the first save was interrupted) are those folders set aside and the run starts
  from step 0, saying so.

The chosen step is given to verl as ``trainer.resume_mode=resume_path`` (verl's own loader does the rest).
Optimiser state that the rotation removed from older saves (``rotation.OPTIM_GLOB``) may be missing from a manifest's
files; ``checkpoint_guard.check_optimizer_state`` decides whether that step can still resume. The run folder is
untrusted input: the manifest is checked by allow-list (``checkpoint_manifest.manifest_problem``), links refused.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from corewarding.checkpoint_manifest import MANIFEST, CheckpointError, manifest_problem, write_manifest
from corewarding.run_folder import VERL_ACTOR, VERL_TEACHER, VERL_TRACKER, step_dirs, verl_shard_name
from corewarding.training.verl.rotation import OPTIM_GLOB, latest_step

log = logging.getLogger(__name__)

SET_ASIDE_SUFFIX = ".incomplete"


@dataclass(frozen=True)
class ResumePoint:
    """The save a launch resumes from (None: from step 0) and the newer saves passed over, with why."""

    folder: Path | None
    passed_over: tuple[tuple[int, str], ...] = ()

    @property
    def step(self) -> int:
        return int(self.folder.name.removeprefix("global_step_")) if self.folder else 0


def write_step_manifest(step_folder: Path, threads: int = 8) -> None:
    """The save is complete: record every file of ``step_folder`` (all ranks', on the file system every node sees)."""
    write_manifest(step_folder, threads=threads)
    log.info("%s: manifest written (the save is complete)", step_folder)


def saved_world_sizes(step_folder: Path) -> set[int]:
    """The world sizes whose model shards the step's actor folder holds (from verl's file names)."""
    sizes = set()
    for path in (step_folder / VERL_ACTOR).glob("model_world_size_*_rank_*.pt"):
        middle = path.name.removeprefix("model_world_size_").split("_rank_")[0]
        if middle.isdigit():
            sizes.add(int(middle))
    return sizes


def step_problem(step_folder: Path, world_size: int, teacher: bool, needs_manifest: bool = True) -> str | None:
    """Why ``step_folder`` cannot be resumed by ``world_size`` ranks (None when it can): a missing or unreadable
    manifest, a file that differs from it, another world size's shards, a missing rank's shard or teacher shard."""
    if (step_folder / MANIFEST).exists() or needs_manifest:
        problem = manifest_problem(step_folder, may_be_removed=(f"{VERL_ACTOR}/{OPTIM_GLOB}",))
        if problem is not None:
            return problem
    sizes = saved_world_sizes(step_folder)
    if sizes and world_size not in sizes:
        return f"saved by {', '.join(map(str, sorted(sizes)))} rank(s), this launch has {world_size}"
    required = [f"{VERL_ACTOR}/{verl_shard_name('model', rank, world_size)}" for rank in range(world_size)]
    if teacher:
        required += [f"{VERL_TEACHER}/rank_{rank}.pt" for rank in range(world_size)]
    required.append("data.pt")
    for rel in required:
        path = step_folder / rel
        if path.is_symlink() or not path.is_file():
            return f"{rel} is missing"
    return None


def choose(checkpoints: Path, world_size: int, teacher: bool) -> ResumePoint:
    """The newest usable save under ``checkpoints`` (see the module's rules); raises ``CheckpointError`` in one line
    when the folder holds saves and none is usable."""
    steps = step_dirs(checkpoints)
    if not steps:
        return ResumePoint(None)
    recorded = latest_step(checkpoints)
    has_manifests = any((folder / MANIFEST).exists() for folder in steps.values())
    passed: list[tuple[int, str]] = []
    for step, folder in sorted(steps.items(), reverse=True):
        # a run saved before manifests existed: the steps verl recorded are checked for their files only
        legacy = not has_manifests and recorded is not None and step <= recorded
        problem = step_problem(folder, world_size, teacher, needs_manifest=not legacy)
        if problem is None:
            if legacy:
                log.warning("%s: saved before manifests, so only its files' presence was checked", folder)
            return ResumePoint(folder, tuple(passed))
        passed.append((step, problem))
    if recorded is None and not has_manifests:  # the first save was interrupted: no completed step is lost
        return ResumePoint(None, tuple(passed))
    found = "; ".join(f"step {step}: {problem}" for step, problem in passed)
    raise CheckpointError(
        f"{checkpoints}: no usable save to resume ({found}); restore the damaged files, or train into a new --run-dir"
    )


def set_aside(folder: Path) -> Path:
    """Rename a passed-over step folder to ``global_step_N.incomplete`` (``.2``, ... when taken); returns the name."""
    target = folder.with_name(folder.name + SET_ASIDE_SUFFIX)
    number = 1
    while target.exists():
        number += 1
        target = folder.with_name(f"{folder.name}{SET_ASIDE_SUFFIX}.{number}")
    os.replace(folder, target)
    return target


def apply(trainer_config: Any, checkpoints: Path, world_size: int, teacher: bool) -> ResumePoint | None:
    """Pick the step (``choose``) for a launch with verl's ``resume_mode=auto`` and point verl at it; set aside the
    newer saves passed over, each named in one line. Other resume modes are left as the user set them: None."""
    if str(trainer_config.resume_mode) != "auto":
        return None
    recorded = latest_step(checkpoints)
    vanished = recorded is not None and not (checkpoints / f"global_step_{recorded}").exists()
    point = choose(checkpoints, world_size, teacher)
    resumed = f"resuming from step {point.step}" if point.folder else "starting from step 0 (no save completed)"
    for step, problem in point.passed_over:
        moved = set_aside(checkpoints / f"global_step_{step}")
        log.warning("step %d incomplete (%s): set aside as %s; %s", step, problem, moved.name, resumed)
    if vanished and recorded is not None and recorded > point.step:
        log.warning("step %d (named by %s) is missing; %s", recorded, VERL_TRACKER, resumed)
    if point.folder is None:
        return point
    trainer_config.resume_mode = "resume_path"
    trainer_config.resume_from_path = str(point.folder)
    log.info("resuming from %s (its manifest checked)", point.folder)
    return point
