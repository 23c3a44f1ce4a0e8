"""A non-tensor column that verl's agent loop returns with other contents than the dataset's is an error naming the
column and its first differing row (verl's ``union_numpy_dict`` asserts, naming neither the row nor the values, and
not at all under ``python -O``); equal columns are joined as verl joins them."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from tensordict import TensorDict
from verl import DataProto

from corewarding.training.verl.batch import column_conflict, same_value, union_columns
from corewarding.training.verl.trainer import CorewardingTrainer
from tests.unit.verl.harness import Pending, ray_get


def obj(*values: Any) -> np.ndarray:
    return np.array(list(values), dtype=object)


def test_equal_columns_join_as_verl_joins_them() -> None:
    returned = {"raw_prompt": obj("a", "b"), "reward_model": obj({"ground_truth": "1"}, float("nan"))}
    ours = {"uid": obj("u0", "u1"), "reward_model": obj({"ground_truth": "1"}, float("nan"))}
    joined = union_columns(returned, ours)
    assert list(joined) == ["raw_prompt", "reward_model", "uid"] and joined["uid"].tolist() == ["u0", "u1"]
    assert same_value(float("nan"), float("nan")) and not same_value(1, 1.0) and not same_value([1], (1,))
    # as strict as verl's check: a NaN inside a dict is not equal to another NaN (verl compares dicts with ==)
    assert not same_value({"x": float("nan")}, {"x": float("nan")})


def test_a_differing_column_names_itself_and_its_row() -> None:
    returned = {"reward_model": obj({"ground_truth": "1"}, {"ground_truth": "3"})}
    ours = {"reward_model": obj({"ground_truth": "1"}, {"ground_truth": "2"})}
    with pytest.raises(ValueError) as caught:
        union_columns(returned, ours)
    assert str(caught.value) == (
        "column 'reward_model' differs at row 1: verl's agent loop returned {'ground_truth': '3'}, "
        "the dataset has {'ground_truth': '2'}"
    )
    assert column_conflict("index", np.arange(2), np.arange(3)) == (
        "column 'index': verl's agent loop returned shape (2,) and dtype int64, the dataset's has (3,) and int64"
    )


def test_the_teacher_rollouts_raise_it_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """``_teacher_rollouts`` re-attaches the prompts' columns to the teacher's rollouts (Co-rewarding-II/III)."""
    import ray

    monkeypatch.setattr(ray, "get", ray_get)
    prompts = DataProto(
        batch=TensorDict({"input_ids": torch.zeros(2, 3, dtype=torch.long)}, batch_size=2),
        non_tensor_batch={"uid": obj("u0", "u1"), "raw_prompt": obj("what is 1+1?", "what is 2+2?")},
    )

    def generate(data: DataProto) -> DataProto:
        assert len(data) == 4  # n=2 rollouts per prompt, interleaved
        raw = obj("what is 1+1?", "what is 1+1?", "what is 2+2?", "what is 2+3?")  # a chat template rewrote one
        return DataProto(batch=TensorDict({}, batch_size=4), non_tensor_batch={"raw_prompt": raw})

    fake = SimpleNamespace(
        cr=OmegaConf.create({"method": {"teacher": {"ema": {"enable": False, "update_interval": 1}}}}),
        global_steps=1,
        _gen_batch=prompts,
        config=OmegaConf.create({"actor_rollout_ref": {"rollout": {"n": 2}}}),
        actor_rollout_wg=SimpleNamespace(corewarding_teacher_to_rollout=lambda global_steps: Pending(None)),
        async_rollout_manager=SimpleNamespace(generate_sequences=generate),
        checkpoint_manager=SimpleNamespace(sleep_replicas=lambda: None),
    )
    with pytest.raises(ValueError, match=r"^column 'raw_prompt' differs at row 3: .* returned 'what is 2\+3\?'"):
        CorewardingTrainer._teacher_rollouts(fake)  # type: ignore[arg-type]
