"""The EMA teacher must be fp32 on both backends: in bf16 (or fp16) the late-schedule update rounds back to the old
value, so such a config is refused when it is composed, naming the key and why."""

from __future__ import annotations

import pytest
import torch
from omegaconf import open_dict

from corewarding.config import ConfigError, compose_config
from corewarding.training.local.teacher import ema_update
from corewarding.training.verl.verl_config import check_supported


def _pair(dtype: torch.dtype) -> tuple[torch.nn.Linear, torch.nn.Linear]:
    teacher, policy = torch.nn.Linear(2, 2, bias=False), torch.nn.Linear(2, 2, bias=False)
    with torch.no_grad():
        teacher.weight.fill_(1.0)
        policy.weight.fill_(2.0)
    return teacher.to(dtype), policy


def test_a_bf16_teacher_does_not_move_at_the_late_rate() -> None:
    """1 + 1e-5 x (2 - 1) is 1.00001 in fp32 but rounds to 1.0 in bf16 (its step at 1.0 is 2^-7)."""
    rate = 1e-5  # configs/method/co_rewarding_2.yaml: alpha_end
    bf16_teacher, policy = _pair(torch.bfloat16)
    for _ in range(100):
        ema_update(bf16_teacher, policy, rate)
    assert torch.equal(bf16_teacher.weight, torch.ones(2, 2, dtype=torch.bfloat16))  # 100 steps: not moved at all
    fp32_teacher, policy = _pair(torch.float32)
    ema_update(fp32_teacher, policy, rate)
    assert fp32_teacher.weight[0, 0].item() == pytest.approx(1.00001, abs=1e-7)


@pytest.mark.parametrize(("dtype", "step"), [("bfloat16", "2^-8"), ("float16", "2^-11")])
def test_a_half_precision_teacher_is_refused_naming_the_key(dtype: str, step: str) -> None:
    message = (
        f"method.teacher.dtype='{dtype}': must be float32: the EMA's late rates (~1e-5 a step) are below "
        f"{dtype}'s rounding step ({step}), so the teacher would stop moving"
    )
    for method in ("co_rewarding_2", "co_rewarding_3"):
        with pytest.raises(ConfigError) as caught:
            compose_config([f"method={method}", f"method.teacher.dtype={dtype}"])
        assert str(caught.value) == message
    cfg = compose_config(["method=co_rewarding_2", "backend=verl", "base_model=qwen3-8b-base", "dataset=math"])
    with open_dict(cfg):
        cfg.method.teacher.dtype = dtype  # changed after validation: the verl translation refuses it too
    with pytest.raises(ConfigError) as caught:
        check_supported(cfg)
    assert str(caught.value) == message


def test_fp32_is_the_only_teacher_dtype() -> None:
    assert compose_config(["method=co_rewarding_2"]).method.teacher.dtype == "float32"
    with pytest.raises(ConfigError) as caught:
        compose_config(["method=co_rewarding_2", "method.teacher.dtype=int8"])
    assert str(caught.value) == "method.teacher.dtype='int8': must be float32"
