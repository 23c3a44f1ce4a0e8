"""Read verl's checkpoint pickles with torch's restricted unpickler before verl reads them without it.

verl 0.9.1 resumes with ``torch.load(..., weights_only=False)`` (model, optimiser and extra-state shards, the
dataloader's ``data.pt``): a crafted file in a run folder, or in a shared store a worker pulls from, would run code on
every GPU worker that resumes. Before verl reads them, each file is loaded once with ``weights_only=True`` and
memory-mapped (the tensor bytes are not read), allowing only the classes verl's FSDP checkpoints hold: each worker
checks its own rank's shards (a ShardedTensor loads only inside its process group), the driver ``data.pt``. A pickle
that needs anything else stops the run with one line naming the file and the global.

torch's restricted unpickler calls only allowed callables, and the same bytes resolve the same globals under verl's
unrestricted load, so a file that passes here runs nothing there. What is not covered: a file swapped between this
check and verl's load (whoever can do that can write the run folder; see docs/checkpoints.md for what protects it).
"""

from __future__ import annotations

import builtins
import logging
import os
import pickle
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from numpy._core.multiarray import _reconstruct  # how numpy 2 pickles an array
from torch.distributed._shard.metadata import ShardMetadata
from torch.distributed._shard.sharded_tensor.api import ShardedTensor
from torch.distributed._shard.sharded_tensor.metadata import (
    MEM_FORMAT_ENCODING,
    ShardedTensorMetadata,
    TensorProperties,
)
from torch.distributed._shard.sharded_tensor.shard import Shard as TensorShard
from torch.distributed._shard.sharding_spec.chunk_sharding_spec import ChunkShardingSpec
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.remote_device import _remote_device
from torch.distributed.tensor import DTensor
from torch.distributed.tensor._dtensor_spec import DTensorSpec, TensorMeta
from torch.distributed.tensor.placement_types import Partial, Replicate, Shard

from corewarding.run_folder import verl_shard_name
from corewarding.training.errors import CheckpointError

log = logging.getLogger(__name__)

# What verl 0.9.1's FSDP1 (ShardedTensor) and FSDP2 (DTensor) shards and its numpy RNG state pickle, beyond torch's
# own defaults. builtins.getattr is how an enum member (MEM_FORMAT_ENCODING) is pickled; the restricted unpickler
# still refuses to call whatever getattr returns unless it is on this list.
VERL_CHECKPOINT_GLOBALS: list[Any] = [
    ShardedTensor, ShardedTensor.ProcessGroupState, ShardedTensorMetadata, TensorProperties, MEM_FORMAT_ENCODING,
    TensorShard, ShardMetadata,
    ChunkShardingSpec, _remote_device, builtins.getattr,
    DTensor, DTensorSpec, TensorMeta, DeviceMesh, Shard, Replicate, Partial,
    np.ndarray, np.dtype, np.dtypes.UInt32DType, _reconstruct,
]  # fmt: skip


class UnsafeCheckpointError(CheckpointError):
    """A checkpoint file needs code outside the allow-list to load: verl's unrestricted load would run it."""


def resume_folder(trainer_config: Any) -> Path | None:
    """The ``global_step_N`` folder verl's ``_load_checkpoint`` will read, by verl's own rules; None when it starts
    from scratch."""
    from verl.utils.checkpoint.checkpoint_manager import find_latest_ckpt_path  # verl: GPU path only

    mode = str(trainer_config.resume_mode)
    if mode == "disable":
        return None
    if mode == "resume_path":
        folder = str(trainer_config.resume_from_path)
    else:
        folder = find_latest_ckpt_path(os.path.abspath(str(trainer_config.default_local_dir)))
        if folder is None:
            return None
    return Path(os.path.abspath(folder))


def shard_file(actor_folder: Path, kind: str, rank: int, world_size: int) -> Path:
    """One rank's ``model`` / ``optim`` / ``extra_state`` file as verl's FSDP checkpoint manager names it (by the
    global rank and world size of ``torch.distributed``)."""
    return actor_folder / verl_shard_name(kind, rank, world_size)


def rank_shards(actor_folder: Path, rank: int, world_size: int) -> list[Path]:
    """The files verl's FSDP checkpoint manager reads for one rank (those present)."""
    files = (shard_file(actor_folder, kind, rank, world_size) for kind in ("model", "optim", "extra_state"))
    return [path for path in files if path.is_file()]


def check_optimizer_state(actor_folder: Path, rank: int, world_size: int, load_contents: list[str]) -> None:
    """Resuming from an older kept save, whose optimiser state was rotated away (``rotation.rotate``), stops with one
    line (verl would fail with a traceback on the missing file) unless the run loads no optimiser state."""
    optim = shard_file(actor_folder, "optim", rank, world_size)
    model = shard_file(actor_folder, "model", rank, world_size)
    if "optimizer" in load_contents and not optim.exists() and model.exists():
        raise CheckpointError(
            f"{actor_folder}: its optimizer state was removed (only the newest kept checkpoint has it); resume from "
            "the newest, or start the optimizer afresh with "
            "actor_rollout_ref.actor.checkpoint.load_contents=[model,extra] in verl.overrides"
        )


def check_pickles(files: Iterable[Path]) -> int:
    """Load each file with torch's restricted unpickler; return how many were checked. Raises
    ``UnsafeCheckpointError`` naming the first file that needs anything outside the allow-list."""
    checked = 0
    with torch.serialization.safe_globals(VERL_CHECKPOINT_GLOBALS):
        for path in files:
            try:
                torch.load(path, map_location="cpu", weights_only=True, mmap=True)
            except Exception as error:
                unsafe = _unsafe_globals(path)
                if not unsafe and not isinstance(error, pickle.UnpicklingError):  # truncated, not a zip, unreadable
                    raise CheckpointError(
                        f"{path}: unreadable ({type(error).__name__}: {error}); remove this step folder (a resume "
                        "falls back to the newest complete one before it) or train into a new --run-dir"
                    ) from error
                raise UnsafeCheckpointError(
                    f"{path}: refused: loading it needs {', '.join(unsafe) or 'code'} outside the allowed checkpoint "
                    f"classes, and verl's unrestricted load would run it ({type(error).__name__}); remove this step "
                    "folder (a resume falls back to the newest complete one before it) or train into a new --run-dir"
                ) from error
            checked += 1
    log.info("checked %d checkpoint file(s): tensors and allowed classes only", checked)
    return checked


def _unsafe_globals(path: Path) -> list[str]:
    allowed = {f"{g.__module__}.{g.__qualname__}" for g in VERL_CHECKPOINT_GLOBALS if hasattr(g, "__qualname__")}
    try:
        found = torch.serialization.get_unsafe_globals_in_checkpoint(path)
    except Exception:  # not even a zip of pickles
        return []
    return [name for name in found if name not in allowed]
