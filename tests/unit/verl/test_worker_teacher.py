"""The teacher as ``CorewardingWorker``'s own methods handle it, not only the helpers of ``teacher.py`` they call:
the EMA's direction at an asymmetric rate (at 0.5 a reversed rate gives the same teacher), and the teacher's shards
saved with a checkpoint and restored by a resume. The worker is verl's class; its engines are tiny modules
(``.actor.engine.module``, ``.ref.engine.module``) and verl's own save/load of the actor is a recorded no-op."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import torch
from omegaconf import OmegaConf
from verl.workers.engine_workers import ActorRolloutRefWorker

from corewarding.training.verl.teacher import shard_fingerprint, teacher_file
from corewarding.training.verl.worker import CorewardingWorker


class Engine:
    def __init__(self, module: torch.nn.Module) -> None:
        self.module = module


class Role:  # verl's TrainingWorker as the worker reads it: .engine.module
    def __init__(self, module: torch.nn.Module) -> None:
        self.engine = Engine(module)


def model(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(5, 3), torch.nn.Linear(3, 2)).double()


def worker(teacher: torch.nn.Module, policy: torch.nn.Module, has_teacher: bool = True) -> CorewardingWorker:
    """A CorewardingWorker without verl's start-up (no Ray, no process group): the attributes its methods read."""
    made = object.__new__(CorewardingWorker)
    made.actor, made.ref = Role(policy), Role(teacher)  # type: ignore[assignment]
    made.config = OmegaConf.create(
        {"corewarding_teacher": has_teacher, "actor": {"checkpoint": {"load_contents": ["model", "optimizer"]}}}
    )
    made._rank = 0
    return made


def params(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: p.detach().clone() for name, p in module.named_parameters()}


def test_the_worker_ema_mixes_rate_of_the_policy_into_the_teacher() -> None:
    teacher, policy = model(0), model(1)
    before = params(teacher)
    assert worker(teacher, policy).corewarding_ema_update(0.3) == 4
    moved = 0.0
    for name, p in policy.named_parameters():
        expected = 0.7 * before[name] + 0.3 * p.detach()  # teacher <- (1 - r) teacher + r policy, r = 0.3
        torch.testing.assert_close(teacher.get_parameter(name).detach(), expected, rtol=0, atol=1e-12)
        moved = max(moved, float((expected - before[name]).abs().max()))
    assert moved > 0.05  # 0.3 and 0.7 give teachers this far apart: the check tells the rate from 1 - rate
    assert params(policy).keys() == before.keys()
    for name, p in params(policy).items():  # the policy is read, never written
        assert torch.equal(p, model(1).get_parameter(name).detach())


@pytest.fixture()
def verl_checkpoint_io(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """verl's own actor save/load replaced by a record (the worker adds the teacher around them); one rank."""
    calls: list[str] = []
    monkeypatch.setattr(ActorRolloutRefWorker, "save_checkpoint", lambda self, *a, **k: calls.append("save"))
    monkeypatch.setattr(ActorRolloutRefWorker, "load_checkpoint", lambda self, *a, **k: calls.append("load"))
    monkeypatch.setattr(torch.distributed, "get_rank", lambda *a, **k: 0)
    monkeypatch.setattr(torch.distributed, "get_world_size", lambda *a, **k: 1)
    return calls


def test_a_worker_checkpoint_holds_the_teacher_and_a_resume_restores_it(
    tmp_path: Path, verl_checkpoint_io: list[str], caplog: Any
) -> None:
    teacher, policy = model(0), model(1)
    first = worker(teacher, policy)
    first.corewarding_ema_update(0.3)  # a teacher that is neither the base model nor the policy
    actor_dir = tmp_path / "global_step_2" / "actor"
    first.save_checkpoint(str(actor_dir), None, 2, None)
    saved = params(teacher)
    path = teacher_file(actor_dir, 0)
    assert path.is_file(), "the worker's save wrote no teacher shard"
    on_disk = torch.load(path, weights_only=True)
    assert on_disk.keys() == saved.keys() and all(torch.equal(on_disk[k], v) for k, v in saved.items())

    fresh = model(2)  # a new launch: its teacher starts as something else (the base model)
    with caplog.at_level(logging.INFO, logger="corewarding.training.verl.worker"):
        worker(fresh, model(1)).load_checkpoint(str(actor_dir))
    for name, value in saved.items():
        assert torch.equal(fresh.get_parameter(name).detach(), value), f"{name}: the resume did not restore it"
    assert f"teacher {shard_fingerprint(on_disk)}" in caplog.text  # the resumed-from line names what was loaded
    assert verl_checkpoint_io == ["save", "load"]


def test_without_a_teacher_no_teacher_shard_is_written(tmp_path: Path, verl_checkpoint_io: list[str]) -> None:
    actor_dir = tmp_path / "global_step_1" / "actor"
    worker(model(0), model(1), has_teacher=False).save_checkpoint(str(actor_dir), None, 1, None)
    assert not teacher_file(actor_dir, 0).exists() and verl_checkpoint_io == ["save"]
