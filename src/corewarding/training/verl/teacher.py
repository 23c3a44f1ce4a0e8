"""The Co-rewarding-II teacher inside verl's reference worker: an in-place EMA over local FSDP shards, and its
checkpoint (verl saves only the actor, so the teacher's shards are saved beside it, one file per rank).

Both modules are the same model wrapped the same way on the same ranks, so their local shards line up one to one;
the update is the local backend's ``teacher <- (1 - a) teacher + a policy``, elementwise, in the teacher's dtype.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

import torch
from torch.distributed.tensor import DTensor

from corewarding.checkpoint_manifest import CheckpointError
from corewarding.run_folder import VERL_TEACHER

TEACHER_DIR = VERL_TEACHER


def local_shard(tensor: torch.Tensor) -> torch.Tensor:
    """This rank's part of a parameter: the local tensor of a DTensor (FSDP2), else the tensor itself."""
    return tensor.to_local() if isinstance(tensor, DTensor) else tensor.data


def shard_fingerprint(tensors: Mapping[str, torch.Tensor]) -> str:
    """A short SHA-256 over the names and fp32 bytes of this rank's shards, in name order: the same for a module's
    live shards (``module.state_dict()``, ``named_parameters()``) and for the file they were saved to, so a resumed
    run can say exactly what it loaded."""
    digest = hashlib.sha256()
    for name in sorted(tensors):
        shard = local_shard(tensors[name]).detach().to("cpu", torch.float32).contiguous()
        digest.update(name.encode())
        digest.update(shard.numpy().tobytes())
    return digest.hexdigest()[:16]


def _pairs(teacher: torch.nn.Module, policy: torch.nn.Module) -> list[tuple[str, torch.Tensor, torch.Tensor]]:
    policy_params = dict(policy.named_parameters())
    teacher_params = dict(teacher.named_parameters())
    if policy_params.keys() != teacher_params.keys():
        only = sorted(set(policy_params) ^ set(teacher_params))[:5]
        raise ValueError(f"teacher and policy parameters differ: {only}")
    out = []
    for name, param in teacher_params.items():
        t, p = local_shard(param), local_shard(policy_params[name])
        if t.shape != p.shape:
            raise ValueError(f"{name}: teacher shard {tuple(t.shape)} vs policy shard {tuple(p.shape)}")
        out.append((name, t, p))
    return out


@torch.no_grad()
def ema_update_shards(teacher: torch.nn.Module, policy: torch.nn.Module, rate: float) -> int:
    """teacher <- (1 - rate) * teacher + rate * policy on this rank's shards; returns the parameters updated.

    Under FSDP2 with verl's ``reshard_after_forward=True`` every module, the root included, is resharded after each
    forward, so each parameter is a DTensor and the next forward gathers the updated shards. A module that still has
    its gathered parameters registered (``reshard_after_forward=False``) fails the shard shape check instead.
    """
    pairs = _pairs(teacher, policy)
    for _, t, p in pairs:
        t.mul_(1.0 - rate).add_(p.to(device=t.device, dtype=t.dtype), alpha=rate)
    return len(pairs)


def teacher_file(actor_checkpoint_dir: str | Path, rank: int) -> Path:
    """``.../global_step_N/teacher/rank_R.pt`` beside verl's ``.../global_step_N/actor``."""
    return Path(actor_checkpoint_dir).parent / TEACHER_DIR / f"rank_{rank}.pt"


def save_teacher_shards(teacher: torch.nn.Module, path: Path) -> None:
    """Save this rank's teacher shards atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {name: local_shard(p).detach().cpu().clone() for name, p in teacher.named_parameters()}
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    os.close(fd)
    try:
        torch.save(state, tmp)
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)


@torch.no_grad()
def load_teacher_shards(teacher: torch.nn.Module, path: Path) -> None:
    """Copy saved shards into this rank's teacher; a missing or unreadable file, a missing name or a wrong shape is
    an error naming the file."""
    if not path.is_file():
        raise CheckpointError(f"{path}: no teacher checkpoint (was this run saved by another world size?)")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # a truncated zip gives OSError(22) without the file's name
        raise CheckpointError(f"{path}: unreadable teacher shard ({type(exc).__name__}: {exc})") from exc
    for name, param in teacher.named_parameters():
        if name not in state:
            raise KeyError(f"{path}: no shard for {name}")
        shard = local_shard(param)
        if state[name].shape != shard.shape:
            raise ValueError(f"{path}: {name} has shape {tuple(state[name].shape)}, expected {tuple(shard.shape)}")
        shard.copy_(state[name].to(device=shard.device, dtype=shard.dtype))
