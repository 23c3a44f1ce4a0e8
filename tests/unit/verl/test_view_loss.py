"""Co-rewarding-I's loss on verl's own loss code: the sum of the two views' token-means (the reference), or with the
switch off verl's single token-mean. A hand-built batch of two views with different response lengths, converted
exactly as verl's trainer converts it (``DataProto.to_tensordict`` then ``left_right_2_no_padding``)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
import torch
from tensordict import TensorDict
from verl import DataProto
from verl.utils import tensordict_utils as tu
from verl.utils.metric import Metric
from verl.utils.py_functional import append_to_dict
from verl.workers.config import FSDPActorConfig
from verl.workers.engine.utils import prepare_micro_batches
from verl.workers.utils.losses import ppo_loss
from verl.workers.utils.padding import left_right_2_no_padding

from corewarding.training.verl.view_loss import VIEW_ID_KEY, row_views, tag_views, view_sum_ppo_loss

P, R = 3, 5
RESPONSE_LENS = [2, 5, 1, 3]  # rows 0, 1: original (7 tokens); rows 2, 3: rephrased (4 tokens)
VIEWS = ["original", "original", "rephrased", "rephrased"]
KL_COEF = 0.005


def _batch(
    shift: Sequence[float] = (0.0,) * 4, advantages: Sequence[float] | None = None
) -> tuple[TensorDict, list[torch.Tensor]]:
    """The batch and the policy's log-probs: ``old + shift[row]`` (ratio e^shift), advantages per row if given."""
    gen = torch.Generator().manual_seed(3)
    n = len(RESPONSE_LENS)
    response_mask = torch.zeros(n, R, dtype=torch.long)
    for i, length in enumerate(RESPONSE_LENS):
        response_mask[i, :length] = 1
    prompt_mask = torch.ones(n, P, dtype=torch.long)
    prompt_mask[0, 0] = 0  # one left-padded prompt
    attention = torch.cat([prompt_mask, response_mask], dim=1)
    input_ids = torch.randint(1, 50, (n, P + R), generator=gen) * attention
    old = -torch.rand(n, R, generator=gen) * response_mask
    adv_rows = torch.randn(n, 1, generator=gen) if advantages is None else torch.tensor(advantages).unsqueeze(-1)
    adv = adv_rows.expand(n, R) * response_mask
    ref = (old + 0.3 * torch.randn(n, R, generator=gen)) * response_mask
    proto = DataProto.from_single_dict(
        {
            "prompts": input_ids[:, :P], "responses": input_ids[:, P:], "input_ids": input_ids,
            "attention_mask": attention, "response_mask": response_mask,
            "position_ids": (attention.cumsum(-1) - 1).clamp(min=0),
            "old_log_probs": old, "advantages": adv.contiguous(), "ref_log_prob": ref,
            "extra_info": np.asarray([{"cr_view": v, "cr_pair": i // 2} for i, v in enumerate(VIEWS)], dtype=object),
        }
    )  # fmt: skip
    data = left_right_2_no_padding(proto.to_tensordict())
    tokens = int(response_mask.sum())
    tu.assign_non_tensor(data, dp_size=1, batch_num_tokens=tokens, global_batch_size=n)
    # the policy's log-probs as the engine returns them: one value per non-padded token; ratio e^shift
    values = []
    for i in range(n):
        seq = torch.zeros(int(attention[i].sum()))
        length = RESPONSE_LENS[i]
        seq[-length - 1 : -1] = old[i, :length] + shift[i]  # log-prob of token t sits at position t - 1
        values.append(seq)
    return data, [v.requires_grad_(True) for v in values]


def _per_token_loss(data: TensorDict) -> torch.Tensor:
    """By hand: ratio 1, so PPO's clipped term is -A; k3 KL = e^d - d - 1 with d = ref - logp."""
    old, ref, adv = data["old_log_probs"], data["ref_log_prob"], data["advantages"]
    d = ref - old
    return -adv + KL_COEF * (d.exp() - d - 1).clamp(-10, 10)


def _config() -> FSDPActorConfig:
    return FSDPActorConfig(
        strategy="fsdp", ppo_mini_batch_size=4, ppo_micro_batch_size_per_gpu=4, use_kl_loss=True,
        kl_loss_coef=KL_COEF, kl_loss_type="low_var_kl", loss_agg_mode="token-mean", rollout_n=1,
    )  # fmt: skip


def test_view_sum_equals_the_sum_of_per_view_token_means() -> None:
    data, rows = _batch()
    log_probs = torch.cat(rows)
    assert row_views(data) == VIEWS
    assert tag_views(data, row_views(data)) == 2
    assert data[VIEW_ID_KEY].tolist() == [0, 0, 1, 1]
    assert data["cr_view_weight"].tolist() == pytest.approx([11 / 7, 11 / 7, 11 / 4, 11 / 4])
    loss, metrics = view_sum_ppo_loss(_config(), {"log_probs": log_probs}, data)
    per_token, mask = _per_token_loss(data), data["response_mask"].bool()
    original, rephrased = per_token[:2][mask[:2]].mean(), per_token[2:][mask[2:]].mean()  # 7 and 4 tokens
    torch.testing.assert_close(loss, original + rephrased, rtol=1e-5, atol=1e-6)
    assert "actor/pg_loss" in metrics
    # each view's own token-means, by hand: PPO is -A at ratio 1, the KL is k3 against the reference
    adv, d = data["advantages"], data["ref_log_prob"] - data["old_log_probs"]
    k3 = (d.exp() - d - 1).clamp(-10, 10)
    for tag, part in (("ori", slice(0, 2)), ("aug", slice(2, 4))):
        m = mask[part]
        assert metrics[f"actor/pg_loss_{tag}"].aggregate() == pytest.approx(float(-adv[part][m].mean()), abs=1e-6)
        assert metrics[f"actor/kl_loss_{tag}"].aggregate() == pytest.approx(float(k3[part][m].mean()), abs=1e-6)
        assert metrics[f"actor/pg_clipfrac_{tag}"].aggregate() == 0.0  # ratio 1 never clips
    loss.backward()  # differentiable through the policy's log-probs
    assert all(r.grad is not None and bool(r.grad.abs().sum() > 0) for r in rows)


@pytest.mark.parametrize("micro", [1, 2])
def test_micro_batches_add_up_to_the_view_sum(micro: int) -> None:
    """verl sums the micro-batches' losses (gradient accumulation); the per-row weights travel with the rows."""
    data, rows = _batch()
    tag_views(data, row_views(data))
    tu.assign_non_tensor(data, use_dynamic_bsz=False, micro_batch_size_per_gpu=micro)  # as verl's train_batch
    total = torch.zeros(())
    batches, _ = prepare_micro_batches(data)
    for i, batch in enumerate(batches):
        loss, _ = view_sum_ppo_loss(_config(), {"log_probs": torch.cat(rows[i * micro : (i + 1) * micro])}, batch)
        total = total + loss
    per_token, mask = _per_token_loss(data), data["response_mask"].bool()
    expected = per_token[:2][mask[:2]].mean() + per_token[2:][mask[2:]].mean()
    torch.testing.assert_close(total, expected, rtol=1e-5, atol=1e-6)


SHIFT = (0.4, -0.1, 0.3, 0.1)  # log-ratio per row: e^0.4 = 1.49 and e^0.3 = 1.35 clip at 1.2 for A > 0
ADVANTAGES = (1.0, -1.0, 1.0, -1.0)  # e^-0.1 = 0.90 and e^0.1 = 1.11 stay inside [0.8, 1.2] for A < 0


def _ranks(n_ranks: int) -> list[tuple[TensorDict, list[torch.Tensor]]]:
    """The hand batch split over ``n_ranks`` data-parallel ranks (2: the originals on one, the rephrasings on the
    other), each with the whole batch's token count and view weights, as verl's engine and ``tag_views`` set them."""
    data, rows = _batch(SHIFT, ADVANTAGES)
    tag_views(data, row_views(data))
    if n_ranks == 1:
        return [(data, rows)]
    shards = tu.chunk_tensordict(data, n_ranks)
    per = len(rows) // n_ranks
    for shard in shards:
        tu.assign_non_tensor(shard, dp_size=n_ranks)
    return [(shard, rows[i * per : (i + 1) * per]) for i, shard in enumerate(shards)]


def _engine_metrics(n_ranks: int, micro: int) -> dict[str, float]:
    """One mini-batch's actor metrics reduced as verl 0.9.1 reduces them: per rank the micro-batches' metrics
    appended (``engine.utils.postprocess_batch_func``), gathered over the ranks (``_postprocess_output``), then
    ``Metric.aggregate_dp`` (``engine_workers.update_actor``): SUM metrics add the micro-batches, mean over ranks."""
    gathered: dict[str, list[Metric]] = {}
    for data, rows in _ranks(n_ranks):
        tu.assign_non_tensor(data, use_dynamic_bsz=False, micro_batch_size_per_gpu=micro)
        rank: dict[str, Any] = {}
        batches, _ = prepare_micro_batches(data)
        for i, batch in enumerate(batches):
            log_probs = torch.cat(rows[i * micro : (i + 1) * micro])
            append_to_dict(rank, view_sum_ppo_loss(_config(), {"log_probs": log_probs}, batch)[1])
        for key, value in rank.items():
            if isinstance(value, Metric):
                gathered.setdefault(key, []).append(value)
    return {key: float(Metric.aggregate_dp(values)) for key, values in gathered.items()}


@pytest.mark.parametrize(("n_ranks", "micro"), [(1, 4), (1, 1), (2, 1), (2, 2)])
def test_each_views_metrics_are_token_means_over_the_view(n_ranks: int, micro: int) -> None:
    """ppo_kl (verl's: the mean of old - new log-prob) and the clip fraction of each view over its 7 and 4 tokens,
    whatever the micro-batches and ranks; a rank or micro-batch without rows of a view still reports it (as 0), so
    verl's aggregation over ranks sees the same number of values on every rank."""
    m = _engine_metrics(n_ranks, micro)
    assert m["actor/ppo_kl_ori"] == pytest.approx((2 * -0.4 + 5 * 0.1) / 7, abs=1e-6)  # rows 0 (2 tokens), 1 (5)
    assert m["actor/ppo_kl_aug"] == pytest.approx((1 * -0.3 + 3 * -0.1) / 4, abs=1e-6)  # rows 2 (1 token), 3 (3)
    assert m["actor/pg_clipfrac_ori"] == pytest.approx(2 / 7, abs=1e-6)  # row 0's two tokens clip
    assert m["actor/pg_clipfrac_aug"] == pytest.approx(1 / 4, abs=1e-6)  # row 2's one token clips
    pg_ori, pg_aug = (2 * -1.2 + 5 * math.exp(-0.1)) / 7, (1 * -1.2 + 3 * math.exp(0.1)) / 4
    assert m["actor/pg_loss_ori"] == pytest.approx(pg_ori, abs=1e-6)
    assert m["actor/pg_loss_aug"] == pytest.approx(pg_aug, abs=1e-6)
    # the logged aggregate losses are the objective's: the sum of the views' token-means, not one mean over both
    assert m["actor/pg_loss"] == pytest.approx(pg_ori + pg_aug, abs=1e-6)
    assert m["kl_loss"] == pytest.approx(m["actor/kl_loss_ori"] + m["actor/kl_loss_aug"], abs=1e-6)


def test_the_logged_kl_loss_is_the_sum_of_the_views_k3_means() -> None:
    data, rows = _batch(SHIFT, ADVANTAGES)
    tag_views(data, row_views(data))
    _, metrics = view_sum_ppo_loss(_config(), {"log_probs": torch.cat(rows)}, data)
    mask = data["response_mask"].bool()
    d = data["ref_log_prob"] - (data["old_log_probs"] + torch.tensor(SHIFT).unsqueeze(-1))
    k3 = (d.exp() - d - 1).clamp(-10, 10)
    kl_ori, kl_aug = float(k3[:2][mask[:2]].mean()), float(k3[2:][mask[2:]].mean())
    assert metrics["actor/kl_loss_ori"].aggregate() == pytest.approx(kl_ori, abs=1e-6)
    assert metrics["kl_loss"].aggregate() == pytest.approx(kl_ori + kl_aug, abs=1e-6)
    assert metrics["actor/pg_clipfrac"].aggregate() == pytest.approx(3 / 11)  # verl's own, over both views


def test_switch_off_is_verls_single_token_mean() -> None:
    data, rows = _batch()
    log_probs = torch.cat(rows)
    loss, _ = ppo_loss(_config(), {"log_probs": log_probs}, data)  # what the worker keeps with the switch off
    per_token, mask = _per_token_loss(data), data["response_mask"].bool()
    torch.testing.assert_close(loss, per_token[mask].mean(), rtol=1e-5, atol=1e-6)
    tag_views(data, row_views(data))
    summed, _ = view_sum_ppo_loss(_config(), {"log_probs": log_probs}, data)
    assert not torch.allclose(summed, loss)


def test_a_view_without_tokens_is_an_error() -> None:
    data, _ = _batch()
    with pytest.raises(ValueError, match="no response tokens"):
        tag_views(data, ["original"] * 4, all_reduce=lambda t: t.mul_(torch.tensor([1.0], dtype=t.dtype) * 0))


def test_a_rank_holding_one_view_weights_its_rows_by_the_whole_batch() -> None:
    """verl splits the batch over data-parallel ranks: a shard may hold one view only. Every rank all-reduces the same
    two counts (original, rephrased), so the weights equal the whole batch's (11/7 and 11/4 here)."""
    mask = torch.zeros(4, R, dtype=torch.long)
    for i, length in enumerate(RESPONSE_LENS):
        mask[i, :length] = 1
    shards = {"a": (slice(0, 2), VIEWS[:2]), "b": (slice(2, 4), VIEWS[2:])}
    local = {}
    for name, (rows, views) in shards.items():
        local[name] = TensorDict({"response_mask": mask[rows]}, batch_size=2)
        assert tag_views(local[name], views, all_reduce=lambda t: None) == 1  # counts this shard alone
    counts = {n: torch.tensor([7.0, 0.0] if n == "a" else [0.0, 4.0], dtype=torch.float64) for n in shards}
    for name, (_, views) in shards.items():
        other = counts["b" if name == "a" else "a"]
        tag_views(local[name], views, all_reduce=lambda t, other=other: t.add_(other))  # the sum over both ranks
    assert local["a"]["cr_view_weight"].tolist() == pytest.approx([11 / 7, 11 / 7])
    assert local["b"]["cr_view_weight"].tolist() == pytest.approx([11 / 4, 11 / 4])


def test_rows_without_a_view_are_an_error_not_a_silent_token_mean() -> None:
    data, _ = _batch()
    tu.assign_non_tensor(data, extra_info=[{"cr_pair": 0}] * 4)
    with pytest.raises(KeyError, match=r"rows \[0, 1, 2, 3\] lack extra_info.cr_view"):
        row_views(data)
