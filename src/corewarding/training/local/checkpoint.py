"""Checkpoints of the local backend: model, optimiser, scheduler, teacher, RNG state and data position.

Each checkpoint is written to a temporary folder and renamed into place, so a killed run never leaves a half-written
``global_step_N``; ``latest`` names the newest one. Its last file is ``manifest.json``, the size and SHA-256 of every
other file, so a resume can tell a complete, intact checkpoint from one that lost files or had bytes changed since
(a partial copy, a full disk, a bad sync); ``resume_candidates`` yields only those, newest first. A checkpoint
without a manifest is not trusted unless the caller says so (``trust_unverified``, ``--trust-unverified``).

Nothing in a checkpoint is unpickled: optimiser, scheduler and RNG state are ``trainer.safetensors`` plus
``trainer.json`` (see safe_state), the teacher is ``teacher.safetensors``, the model is loaded from safetensors only.
A checkpoint of the old pickle format (``trainer.pt``) is refused with one line naming ``corewarding checkpoint
convert``, which reads it under torch's ``weights_only`` allow-list. The manifest detects corruption, not a hostile
writer: whoever can write the folder can rewrite it too (see docs/checkpoints.md). So a resume also checks the optimiser
and scheduler values it restores against the config (restored_state), and passes over a checkpoint that raises anything
while loading, with one line naming the file.
"""

from __future__ import annotations

import errno
import json
import logging
import pickle
import random
import shutil
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import torch
from numpy._core.multiarray import _reconstruct
from safetensors import SafetensorError
from safetensors.torch import load_model, save_file, save_model
from transformers import PreTrainedModel

from corewarding.checkpoint_manifest import MANIFEST, manifest_problem, write_manifest
from corewarding.config import ConfigError
from corewarding.files import disk_full
from corewarding.run_folder import LATEST, step_dir, step_dirs
from corewarding.training.errors import CheckpointError, CheckpointSaveError, LegacyCheckpointError
from corewarding.training.local.restored_state import OptimizerSettings, RestoredStateError, restored_problem
from corewarding.training.local.safe_state import load_state, save_state

log = logging.getLogger(__name__)
T = TypeVar("T")

# Files every local checkpoint holds besides its manifest; the weights are one file or a sharded index.
REQUIRED = (
    "trainer_state.json",
    "trainer.safetensors",
    "trainer.json",
    "model/config.json",
    "model/tokenizer_config.json",
)
TEACHER = "teacher.safetensors"
# The old pickle format: loading it with torch.load(weights_only=False) runs whatever code it holds.
LEGACY_TRAINER, LEGACY_TEACHER = "trainer.pt", "teacher.pt"
WEIGHTS = ("model/model.safetensors", "model/model.safetensors.index.json")


# What reading a damaged old pickle checkpoint raises (torch's zip reader, pickle, safetensors, JSON, a state dict of
# the wrong shape), for its conversion. A resume passes over a checkpoint that raises anything at all (``_loads``).
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
    model: PreTrainedModel,
    tokenizer: Any,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    teacher: torch.nn.Module | None = None,
) -> Path:
    """Write ``global_step_{step}`` atomically and point ``latest`` at it.

    A write that fails (a full disk, a file-size limit) removes the temporary files and raises CheckpointSaveError
    naming the folder and the space it needs; the previous checkpoint stays the newest."""
    final = step_dir(checkpoints_dir, state.step)
    tmp = checkpoints_dir / f".tmp_{final.name}"
    pointer = checkpoints_dir / f".{LATEST}.tmp"
    try:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        model.save_pretrained(tmp / "model", safe_serialization=True)
        tokenizer.save_pretrained(tmp / "model")
        trainer = {"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(), "rng": rng_state()}
        save_state(trainer, tmp / "trainer.safetensors", tmp / "trainer.json")
        if teacher is not None:
            save_model(teacher, str(tmp / TEACHER))
        (tmp / "trainer_state.json").write_text(json.dumps(state.__dict__))
        write_manifest(tmp)
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)
        pointer.write_text(final.name)
        pointer.replace(checkpoints_dir / LATEST)
    except (OSError, SafetensorError) as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        pointer.unlink(missing_ok=True)
        raise CheckpointSaveError(_save_failure(checkpoints_dir, final, exc, model, optimizer, teacher)) from exc
    return final


def _save_failure(
    checkpoints_dir: Path,
    final: Path,
    exc: BaseException,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    teacher: torch.nn.Module | None,
) -> str:
    """One line: the checkpoint that could not be written and why; for a full disk, the space it needs."""
    err = getattr(exc, "errno", None)
    text = str(exc)
    if not disk_full(exc):
        return f"cannot write checkpoint {final}: {type(exc).__name__}: {text}"
    needed = checkpoint_bytes(checkpoints_dir, model, optimizer, teacher)
    free = shutil.disk_usage(checkpoints_dir).free
    if err == errno.EFBIG or "File too large" in text:
        reason, advice = "a file is over the file-size limit, ulimit -f", "raise the limit"
    else:
        reason, advice = "no space left on device", "free space"
    return (
        f"cannot write checkpoint {final} ({reason}): it needs about {needed / 1e6:.1f} MB, "
        f"{free / 1e6:.1f} MB free in {checkpoints_dir}; {advice} and run the same command to resume"
    )


def checkpoint_bytes(
    checkpoints_dir: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer, teacher: torch.nn.Module | None
) -> int:
    """About how many bytes a checkpoint takes: the newest saved one's size, or its tensors' size if none is bigger."""
    tensors = [*model.state_dict().values(), *(teacher.state_dict().values() if teacher is not None else [])]
    tensors += [v for s in optimizer.state.values() for v in s.values() if isinstance(v, torch.Tensor)]
    estimate = sum(t.numel() * t.element_size() for t in tensors)
    folders = step_folders(checkpoints_dir)
    if folders:
        estimate = max(estimate, sum(p.stat().st_size for p in folders[0].rglob("*") if p.is_file()))
    return estimate


def checkpoint_problem(folder: Path, teacher: bool, trust_unverified: bool = False) -> str | None:
    """Why ``folder`` is not a complete, intact checkpoint (a required file missing, no manifest, a manifest
    mismatch); None when it is. Without a manifest it is accepted only with ``trust_unverified`` (with a warning).
    Raises LegacyCheckpointError for the old pickle format, which is never loaded."""
    if (folder / LEGACY_TRAINER).exists() and not (folder / "trainer.safetensors").exists():
        raise LegacyCheckpointError(
            f"{folder} is an old pickle checkpoint ({LEGACY_TRAINER}), which can run code when loaded; "
            f"if you trust whoever wrote it, run `corewarding checkpoint convert {folder}` and resume again"
        )
    required = [*REQUIRED, *([TEACHER] if teacher else [])]
    missing = [rel for rel in required if not (folder / rel).is_file()]
    if not any((folder / rel).is_file() for rel in WEIGHTS):
        missing.append(WEIGHTS[0])
    if missing:
        return f"missing {', '.join(missing)}"
    if not (folder / MANIFEST).exists():
        if not trust_unverified:
            return f"{MANIFEST} is missing, so its files cannot be verified (--trust-unverified loads it anyway)"
        log.warning("%s has no %s: loading it unverified (--trust-unverified)", folder, MANIFEST)
        return None
    return manifest_problem(folder)


def step_folders(checkpoints_dir: Path) -> list[Path]:
    """Every ``global_step_N`` folder, newest first (temporary folders are hidden and never listed)."""
    return list(reversed(step_dirs(checkpoints_dir).values()))


def resume_candidates(checkpoints_dir: Path, teacher: bool, trust_unverified: bool = False) -> Iterator[Path]:
    """The complete checkpoints, newest first; each incomplete or damaged one is logged by path and passed over."""
    for folder in step_folders(checkpoints_dir):
        problem = checkpoint_problem(folder, teacher, trust_unverified)
        if problem is None:
            yield folder
        else:
            log.warning("%s is not a complete checkpoint (%s); trying the one before it", folder, problem)


def load_trainer_state(path: Path) -> TrainerState:
    """``trainer_state.json`` of the checkpoint ``path``; ValueError when a value is not what a save writes."""
    values = json.loads((path / "trainer_state.json").read_text())
    state = TrainerState(**values)
    counts = (state.step, state.total_steps)
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in counts):
        raise ValueError(f"step={state.step!r}, total_steps={state.total_steps!r}: must be whole numbers >= 0")
    if not isinstance(state.config_hash, str):
        raise ValueError(f"config_hash={state.config_hash!r}: must be a string")
    return state


def restore_trainer(
    path: Path,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    expected: OptimizerSettings,
    step: int,
) -> None:
    """Load optimiser, scheduler and RNG state (safetensors and JSON only, nothing unpickled), after checking every
    restored value against the config's ranges and its schedule at ``step``: RestoredStateError names the key."""
    blob = load_state(path / "trainer.safetensors", path / "trainer.json")
    problem = restored_problem(blob, optimizer, scheduler, expected, step)
    if problem is not None:
        raise RestoredStateError(problem)
    optimizer.load_state_dict(blob["optimizer"])
    scheduler.load_state_dict(blob["scheduler"])
    set_rng_state(blob["rng"])


def restore_teacher(path: Path, teacher: torch.nn.Module) -> None:
    """Load the EMA teacher's weights from ``path/teacher.safetensors`` (every key, no other)."""
    missing, unexpected = load_model(teacher, str(path / TEACHER), strict=True, device="cpu")
    if missing or unexpected:
        raise KeyError(f"missing {missing}, unexpected {unexpected}")


class _Unreadable(Exception):
    """One file of a checkpoint could not be loaded; the message names the file and the error."""


def _load(path: Path, load: Callable[[], T]) -> T:
    """What ``load`` returns; any error it raises (a crafted or damaged file can raise anything) becomes _Unreadable
    naming ``path`` and the error in one line. Only KeyboardInterrupt, SystemExit and MemoryError propagate."""
    try:
        return load()
    except MemoryError:
        raise
    except Exception as exc:  # reported by path by the caller, which tries the checkpoint before it
        lines = str(exc).strip().splitlines()
        why = lines[0] if isinstance(exc, RestoredStateError) else f"{type(exc).__name__}: {lines[0] if lines else ''}"
        raise _Unreadable(f"{path}: {why}") from exc


def resume(
    checkpoints_dir: Path,
    config_hashes: Collection[str],
    policy: Any,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    expected: OptimizerSettings,
    teacher: torch.nn.Module | None = None,
    trust_unverified: bool = False,
) -> TrainerState | None:
    """Load the newest complete, readable checkpoint whose optimiser values agree with ``expected`` (the config's)
    into the given objects and return its state; None when there is no checkpoint at all. A checkpoint that raises
    anything while loading is passed over with one line. Raises ConfigError for checkpoints of another configuration
    (a config hash not in ``config_hashes``, see ``common.accepted_config_hashes``) and CheckpointError when there
    are checkpoints but none can be used (LegacyCheckpointError for one in the old pickle format)."""
    folders = step_folders(checkpoints_dir)
    if not folders:
        return None
    for folder in resume_candidates(checkpoints_dir, teacher is not None, trust_unverified):
        try:
            state = _load(folder / "trainer_state.json", partial(load_trainer_state, folder))
            if state.config_hash not in config_hashes:
                raise ConfigError(
                    f"{checkpoints_dir.parent} holds checkpoints of another configuration (its config.yaml); "
                    "resume with the same overrides, or train into a new paths.runs_dir / --run-dir"
                )
            _load(folder / "model", partial(_load_policy, policy, folder / "model"))
            _load(folder / "trainer.json", partial(restore_trainer, folder, optimizer, scheduler, expected, state.step))
            if teacher is not None:
                _load(folder / TEACHER, partial(restore_teacher, folder, teacher))
        except _Unreadable as exc:
            log.warning("%s; not resumed, trying the checkpoint before it", exc)
            continue
        return state
    unverified = not trust_unverified and any(not (f / MANIFEST).exists() for f in folders)
    raise CheckpointError(
        f"{checkpoints_dir.parent}: no complete checkpoint to resume from ({len(folders)} found, each incomplete, "
        f"unverified or damaged, see the warnings above); move {checkpoints_dir} aside to train from the start"
        + (f", or pass --trust-unverified to load one without {MANIFEST}" if unverified else "")
    )


def _load_policy(policy: Any, model_dir: Path) -> None:
    loaded = type(policy).from_pretrained(model_dir, dtype=policy.dtype, use_safetensors=True)
    policy.load_state_dict(loaded.state_dict())


# torch.load(weights_only=True) refuses every global outside its allow-list; an old trainer.pt also holds NumPy's RNG
# state, so these NumPy array reconstructors (data only, no code) are added for the conversion and nothing else.
# (NumPy 1 pickles name the reconstructor by its old module path.)
NUMPY_ALLOW_LIST: list[Any] = [
    _reconstruct,
    (_reconstruct, "numpy.core.multiarray._reconstruct"),
    np.ndarray,
    np.dtype,
    type(np.dtype(np.uint32)),
]


def convert_legacy(folder: Path) -> None:
    """Rewrite an old pickle checkpoint (``trainer.pt``, ``teacher.pt``) as safetensors and JSON, with a new manifest.

    Its pickles are read with ``weights_only=True`` and a NumPy allow-list, so one holding anything else (a crafted
    object) is refused, not run. The folder's other files are trusted as they are: convert only a checkpoint you trust.
    """
    legacy = folder / LEGACY_TRAINER
    if not legacy.is_file():
        raise CheckpointError(f"{folder}: no {LEGACY_TRAINER} to convert")
    try:
        with torch.serialization.safe_globals(NUMPY_ALLOW_LIST):
            blob = torch.load(legacy, weights_only=True, map_location="cpu")
            teacher = None
            if (folder / LEGACY_TEACHER).is_file():
                teacher = torch.load(folder / LEGACY_TEACHER, weights_only=True, map_location="cpu")
    except pickle.UnpicklingError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CheckpointError(f"{legacy}: refused, it holds more than tensors and plain data ({first})") from exc
    except UNREADABLE as exc:
        raise CheckpointError(f"{legacy}: unreadable ({type(exc).__name__}: {exc})") from exc
    save_state(
        {k: blob[k] for k in ("optimizer", "scheduler", "rng")}, folder / "trainer.safetensors", folder / "trainer.json"
    )
    if teacher is not None:
        save_file({k: v.contiguous().clone() for k, v in teacher.items()}, str(folder / TEACHER))
        (folder / LEGACY_TEACHER).unlink()
    legacy.unlink()
    write_manifest(folder)
