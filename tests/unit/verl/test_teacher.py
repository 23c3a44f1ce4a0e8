"""The Co-rewarding-II teacher in verl's reference worker: the shard-wise EMA is the local backend's EMA, on plain
parameters and on FSDP2's DTensor shards; its checkpoint round-trips and refuses a mismatched one."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Shard, distribute_tensor

from corewarding.checkpoint_manifest import CheckpointError
from corewarding.methods.co_rewarding_2 import ema_rate
from corewarding.training.local.teacher import ema_update
from corewarding.training.verl.teacher import (
    ema_update_shards,
    load_teacher_shards,
    save_teacher_shards,
    shard_fingerprint,
    teacher_file,
)


def pair() -> tuple[torch.nn.Module, torch.nn.Module]:
    torch.manual_seed(0)
    policy = torch.nn.Sequential(torch.nn.Linear(6, 4), torch.nn.Linear(4, 2))
    teacher = copy.deepcopy(policy).double()  # an fp32-vs-bf16 stand-in: the teacher keeps its own dtype
    with torch.no_grad():
        for p in policy.parameters():
            p.add_(torch.randn_like(p))
    return teacher, policy


def test_shard_ema_equals_the_local_backends_ema_over_a_schedule() -> None:
    teacher, policy = pair()
    local = copy.deepcopy(teacher)
    for step in range(1, 6):
        rate = ema_rate(step, 5, 0.01, 1e-5)
        assert ema_update_shards(teacher, policy, rate) == 4
        ema_update(local, policy, rate)
    for a, b in zip(teacher.parameters(), local.parameters(), strict=True):
        assert torch.equal(a, b) and a.dtype == torch.float64
    w = next(teacher.parameters())
    assert not torch.equal(w, next(pair()[0].parameters()))  # it moved


def test_mismatched_modules_are_refused() -> None:
    teacher, _ = pair()
    with pytest.raises(ValueError, match="parameters differ"):
        ema_update_shards(teacher, torch.nn.Sequential(torch.nn.Linear(6, 4)), 0.1)
    with pytest.raises(ValueError, match="shard"):
        ema_update_shards(teacher, torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Linear(5, 2)), 0.1)


@pytest.fixture()
def one_rank_group(tmp_path: Path):
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    yield init_device_mesh("cpu", (1,), mesh_dim_names=("fsdp",))
    dist.destroy_process_group()


def test_dtensor_shards_update_in_place(one_rank_group) -> None:
    teacher, policy = pair()
    local = copy.deepcopy(teacher)
    for module in (teacher, policy):
        for name, param in list(module.named_parameters()):
            owner, leaf = module.get_submodule(name.rpartition(".")[0]), name.rpartition(".")[2]
            dparam = torch.nn.Parameter(distribute_tensor(param.data, one_rank_group, [Shard(0)]))
            setattr(owner, leaf, dparam)
    ema_update_shards(teacher, policy, 0.25)
    ema_update(local, pair()[1], 0.25)
    for a, b in zip(teacher.parameters(), local.parameters(), strict=True):
        assert torch.equal(a.to_local(), b.data)


def test_teacher_checkpoint_round_trip_and_mismatch(tmp_path: Path) -> None:
    teacher, policy = pair()
    path = teacher_file(tmp_path / "global_step_4" / "actor", rank=1)
    assert path == tmp_path / "global_step_4" / "teacher" / "rank_1.pt"
    save_teacher_shards(teacher, path)
    restored, _ = pair()
    ema_update_shards(restored, policy, 0.5)
    load_teacher_shards(restored, path)
    for a, b in zip(restored.parameters(), teacher.parameters(), strict=True):
        assert torch.equal(a, b)
    with pytest.raises(CheckpointError, match=r"rank_0\.pt: no teacher checkpoint"):
        load_teacher_shards(restored, teacher_file(tmp_path / "global_step_4" / "actor", rank=0))
    truncated = teacher_file(tmp_path / "global_step_4" / "actor", rank=2)
    truncated.write_bytes(path.read_bytes()[: path.stat().st_size // 3])  # a save cut off by a crash or full disk
    with pytest.raises(CheckpointError, match=r"rank_2\.pt: unreadable teacher shard"):
        load_teacher_shards(restored, truncated)
    with pytest.raises(ValueError, match="has shape"):
        load_teacher_shards(torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Linear(5, 2)), path)


def test_a_fingerprint_is_the_same_live_and_saved_and_changes_with_one_value(tmp_path: Path) -> None:
    module = torch.nn.Linear(4, 3).to(torch.bfloat16)
    live = shard_fingerprint(module.state_dict())
    torch.save(module.state_dict(), tmp_path / "shard.pt")
    saved = torch.load(tmp_path / "shard.pt", weights_only=True)
    assert shard_fingerprint(dict(reversed(list(saved.items())))) == live  # the order of the keys does not matter
    with torch.no_grad():
        module.weight[0, 0] += 1
    assert shard_fingerprint(module.state_dict()) != live
    assert shard_fingerprint({"other.weight": saved["weight"], "bias": saved["bias"]}) != live  # names count too
