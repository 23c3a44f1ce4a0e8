"""Tests written against the mutants mutmut left alive in the verl hook's vote-group code and the teacher's shard
pairing (`make mutants`, docs/performance.md): hand-built batches, no model or tokenizer."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Shard, distribute_tensor
from verl import DataProto

from corewarding.training.verl.hook import _extra, _vote_groups, rm_scores_for
from corewarding.training.verl.teacher import _pairs, ema_update_shards, local_shard


def batch(n: int, **non_tensors: list[object]) -> DataProto:
    columns = {key: np.asarray(values, dtype=object) for key, values in non_tensors.items()}
    return DataProto.from_dict(tensors={"responses": torch.zeros(n, 2, dtype=torch.long)}, non_tensors=columns)


def test_extra_reads_one_key_of_each_rows_extra_info() -> None:
    data = batch(4, extra_info=[{"cr_view": "rephrased"}, {}, "not a dict", {"cr_view": "original", "x": 1}])
    assert _extra(data, "cr_view", "original") == ["rephrased", "original", "original", "original"]
    assert _extra(data, "cr_pair", None) == [None, None, None, None]
    assert _extra(batch(3), "cr_view", "fallback") == ["fallback"] * 3  # no extra_info column at all


def test_vote_groups_are_uids_or_questions_and_a_missing_one_is_an_error() -> None:
    data = batch(3, uid=[7, "b", "a"], extra_info=[{"cr_pair": 2}, {"cr_pair": "q"}, {"cr_pair": 0}])
    assert _vote_groups(data, pairs=False) == ["7", "b", "a"]
    assert _vote_groups(data, pairs=True) == ["pair-2", "pair-q", "pair-0"]
    with pytest.raises(ValueError, match=r"^the teacher's rows have no uid column, so their votes cannot join"):
        _vote_groups(batch(2), pairs=False, what="teacher's rows")
    with pytest.raises(ValueError, match=r"^the rollouts have no uid column"):
        _vote_groups(batch(2), pairs=False)
    no_pair = batch(2, uid=["a", "b"], extra_info=[{"cr_pair": 1}, {}])
    with pytest.raises(
        ValueError, match=r"^paired rows need extra_info\.cr_pair \(prepare the data with corewarding\)$"
    ):
        _vote_groups(no_pair, pairs=True)


def test_rm_scores_go_back_to_the_training_order() -> None:
    """The manager saw training rows 2, 0, 1 (then two teacher rows): row k of its output goes to order[k]."""
    scores = torch.tensor([[1, 2], [3, 4], [5, 6], [7, 8], [9, 10]], dtype=torch.bfloat16)
    out = rm_scores_for(scores, np.array([2, 0, 1]))
    assert out.dtype == torch.float32 and out.tolist() == [[3.0, 4.0], [5.0, 6.0], [1.0, 2.0]]
    torch.set_default_dtype(torch.float64)  # fp32 by design, whatever torch's default
    try:
        assert rm_scores_for(scores, np.array([1, 0])).dtype == torch.float32
    finally:
        torch.set_default_dtype(torch.float32)


def test_a_dtensors_local_shard_is_a_plain_tensor(tmp_path: Path) -> None:
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        mesh = init_device_mesh("cpu", (1,), mesh_dim_names=("fsdp",))
        param = torch.nn.Parameter(distribute_tensor(torch.arange(6.0).reshape(3, 2), mesh, [Shard(0)]))
        shard = local_shard(param)
        assert not isinstance(shard, DTensor) and shard.tolist() == [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]
    finally:
        dist.destroy_process_group()


def modules(extra: int = 0) -> tuple[torch.nn.Module, torch.nn.Module]:
    torch.manual_seed(3)
    teacher = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Linear(2, 1))
    policy = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Linear(2, 1))
    for i in range(extra):
        policy.add_module(f"extra{i}", torch.nn.Linear(1, 1, bias=False))
    return teacher, policy


def test_shard_pairs_line_up_by_name_and_name_what_differs() -> None:
    teacher, policy = modules()
    pairs = _pairs(teacher, policy)
    assert [name for name, _, _ in pairs] == ["0.weight", "0.bias", "1.weight", "1.bias"]
    for (name, t, p), (_, tp), (_, pp) in zip(
        pairs, teacher.named_parameters(), policy.named_parameters(), strict=True
    ):
        assert t is not tp and t.data_ptr() == tp.data_ptr() and p.data_ptr() == pp.data_ptr(), name
        assert not t.requires_grad and local_shard(tp).data_ptr() == tp.data_ptr()
    _, more = modules(extra=7)
    first_five = ", ".join(f"'extra{i}.weight'" for i in range(5))  # of the seven, sorted
    with pytest.raises(ValueError) as error:
        _pairs(teacher, more)
    assert str(error.value) == f"teacher and policy parameters differ: [{first_five}]"
    with pytest.raises(ValueError, match=r"^teacher and policy parameters differ: \['extra0\.weight'\]$"):
        _pairs(modules(extra=1)[1], teacher)
    wide = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Linear(2, 4))
    with pytest.raises(ValueError, match=r"^1\.weight: teacher shard \(1, 2\) vs policy shard \(4, 2\)$"):
        _pairs(teacher, wide)


def test_the_shard_ema_moves_each_value_by_the_rate_in_the_teachers_dtype() -> None:
    teacher = torch.nn.Linear(2, 1).double()
    policy = torch.nn.Linear(2, 1)
    with torch.no_grad():
        teacher.weight.copy_(torch.tensor([[1.0, -2.0]]))
        teacher.bias.fill_(4.0)
        policy.weight.copy_(torch.tensor([[3.0, 2.0]]))
        policy.bias.fill_(0.0)
    assert ema_update_shards(teacher, policy, 0.25) == 2
    assert teacher.weight.tolist() == [[1.5, -1.0]] and teacher.bias.tolist() == [3.0]
    assert teacher.weight.dtype == torch.float64
