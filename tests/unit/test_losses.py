"""The actor loss pieces, the LR schedule and the EMA teacher, against hand-computed values."""

from __future__ import annotations

import math

import pytest
import torch

from corewarding.methods.co_rewarding_2 import ema_rate
from corewarding.training.local.losses import (
    StepLossMetrics,
    low_var_kl,
    masked_token_mean,
    ppo_clip_loss,
    warmup_cosine_factor,
)
from corewarding.training.local.teacher import ema_update


def test_ppo_clip_and_dual_clip_per_token() -> None:
    ratios = torch.tensor([[1.5, 0.5, 10.0, 1.1]])
    adv = torch.tensor([[1.0, -1.0, -1.0, 2.0]])
    mask = torch.tensor([[1, 1, 1, 0]])
    loss, stats = ppo_clip_loss(torch.log(ratios), torch.zeros(1, 4), adv, mask)
    # token 1: A>0, r=1.5 clipped to 1.2 -> -1.2; token 2: A<0, r=0.5 -> max(0.5, 0.8) = 0.8;
    # token 3: A<0, r=10 -> max(10, 1.2) = 10, dual-clipped to 3; token 4 masked
    assert loss.item() == pytest.approx((-1.2 + 0.8 + 3.0) / 3)
    assert stats["clipfrac"] == pytest.approx(2 / 3)
    # verl's ppo_kl: the mean of old - new log-prob over the 3 tokens, -(ln 1.5 + ln 0.5 + ln 10) / 3
    assert stats["ppo_kl"] == pytest.approx(-math.log(7.5) / 3) and stats["tokens"] == 3.0


def test_step_loss_metrics_sum_the_views_terms_and_weigh_ratios_by_tokens() -> None:
    """Two views over two micro-batches: pg_loss and kl_mean are the sums of the views' terms (the objective; they
    were the views' mean); each view's clip fraction and PPO KL are over its tokens; clipfrac pools each micro-batch's
    tokens and averages the micro-batches, as verl's actor/pg_clipfrac."""
    m = StepLossMetrics(n_micro=2)
    m.add("original", 0.4, 0.02, {"clipfrac": 0.5, "ppo_kl": 0.1, "tokens": 4.0})
    m.add("rephrased", -0.2, 0.04, {"clipfrac": 0.0, "ppo_kl": -0.3, "tokens": 2.0})
    m.end_micro_batch()
    m.add("original", 0.2, 0.06, {"clipfrac": 0.25, "ppo_kl": 0.0, "tokens": 8.0})
    m.add("rephrased", 0.0, 0.02, {"clipfrac": 1.0, "ppo_kl": 0.5, "tokens": 2.0})
    m.end_micro_batch()
    expected = {
        "pg_loss": 0.3 + -0.1, "kl_mean": 0.04 + 0.03, "clipfrac": (2 / 6 + 4 / 10) / 2,
        "pg_loss_ori": (0.4 + 0.2) / 2, "kl_mean_ori": (0.02 + 0.06) / 2, "clipfrac_ori": (2 + 2) / 12,
        "ppo_kl_ori": (0.4 + 0.0) / 12,
        "pg_loss_aug": (-0.2 + 0.0) / 2, "kl_mean_aug": (0.04 + 0.02) / 2, "clipfrac_aug": (0 + 2) / 4,
        "ppo_kl_aug": (-0.6 + 1.0) / 4,
    }  # fmt: skip
    assert m.result() == pytest.approx(expected)
    one = StepLossMetrics(n_micro=2)  # one view: its own terms, no per-view names
    for pg, frac in ((0.4, 0.5), (0.2, 0.0)):
        one.add("original", pg, 0.01, {"clipfrac": frac, "ppo_kl": 0.0, "tokens": 4.0})
        one.end_micro_batch()
    assert one.result() == pytest.approx({"pg_loss": 0.3, "kl_mean": 0.01, "clipfrac": 0.25})


def test_low_var_kl_is_k3_and_clamped() -> None:
    logp, ref = torch.tensor([0.0, 0.0, 0.0]), torch.tensor([0.0, math.log(2.0), 30.0])
    kl = low_var_kl(logp, ref)
    assert kl[0].item() == 0.0
    assert kl[1].item() == pytest.approx(2.0 - math.log(2.0) - 1.0)
    assert kl[2].item() == 10.0


def test_token_mean_over_the_whole_batch() -> None:
    values = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    assert masked_token_mean(values, torch.tensor([[1, 1, 0], [1, 0, 0]])).item() == pytest.approx(7 / 3)
    assert masked_token_mean(values, torch.zeros(2, 3)).item() == 0.0


def test_warmup_cosine_matches_the_paper_schedule() -> None:
    total, warmup = 174, 17  # MATH: 58 steps x 3 epochs, warmup floor(0.1 * 174)
    factors = [warmup_cosine_factor(s, total, warmup) for s in range(total + 1)]
    assert factors[0] == 0.0 and factors[warmup] == 1.0
    assert factors[8] == pytest.approx(8 / 17)
    assert all(
        a >= b for a, b in zip(factors[warmup:-1], factors[warmup + 1 :], strict=True)
    )  # cosine decays monotonically
    assert warmup_cosine_factor(11, 21, 1) == pytest.approx(0.5)  # half-way through the cosine
    assert factors[-1] == pytest.approx(0.0, abs=1e-12)


def test_ema_rate_schedule_and_update() -> None:
    assert ema_rate(1, 330, 0.01, 1e-5) == pytest.approx(0.01)
    assert ema_rate(331, 330, 0.01, 1e-5) == pytest.approx(1e-5)
    assert ema_rate(1000, 330, 0.01, 1e-5) == pytest.approx(1e-5)  # t is clipped to K
    teacher, policy = torch.nn.Linear(2, 1, bias=False), torch.nn.Linear(2, 1, bias=False)
    with torch.no_grad():
        teacher.weight.fill_(0.0)
        policy.weight.fill_(1.0)
    ema_update(teacher, policy, 0.01)
    assert teacher.weight.tolist() == [[pytest.approx(0.01), pytest.approx(0.01)]]
    ema_update(teacher, policy, 0.5)
    assert teacher.weight[0, 0].item() == pytest.approx(0.505)
