"""Co-rewarding-I's loss on verl's own loss code: the sum of the two views' token-means (the reference), or with the
switch off verl's single token-mean. A hand-built batch of two views with different response lengths, converted
exactly as verl's trainer converts it (``DataProto.to_tensordict`` then ``left_right_2_no_padding``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tensordict import TensorDict
from verl import DataProto
from verl.utils import tensordict_utils as tu
from verl.workers.config import FSDPActorConfig
from verl.workers.engine.utils import prepare_micro_batches
from verl.workers.utils.losses import ppo_loss
from verl.workers.utils.padding import left_right_2_no_padding

from corewarding.training.verl.view_loss import VIEW_ID_KEY, row_views, tag_views, view_sum_ppo_loss

P, R = 3, 5
RESPONSE_LENS = [2, 5, 1, 3]  # rows 0, 1: original (7 tokens); rows 2, 3: rephrased (4 tokens)
VIEWS = ["original", "original", "rephrased", "rephrased"]
KL_COEF = 0.005


def _batch() -> tuple[TensorDict, list[torch.Tensor]]:
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
    advantages = torch.randn(n, 1, generator=gen).expand(n, R) * response_mask
    ref = (old + 0.3 * torch.randn(n, R, generator=gen)) * response_mask
    proto = DataProto.from_single_dict(
        {
            "prompts": input_ids[:, :P], "responses": input_ids[:, P:], "input_ids": input_ids,
            "attention_mask": attention, "response_mask": response_mask,
            "position_ids": (attention.cumsum(-1) - 1).clamp(min=0),
            "old_log_probs": old, "advantages": advantages.contiguous(), "ref_log_prob": ref,
            "extra_info": np.asarray([{"cr_view": v, "cr_pair": i // 2} for i, v in enumerate(VIEWS)], dtype=object),
        }
    )  # fmt: skip
    data = left_right_2_no_padding(proto.to_tensordict())
    tokens = int(response_mask.sum())
    tu.assign_non_tensor(data, dp_size=1, batch_num_tokens=tokens, global_batch_size=n)
    # the policy's log-probs as the engine returns them: one value per non-padded token; ratio 1 (= old)
    values = []
    for i in range(n):
        seq = torch.zeros(int(attention[i].sum()))
        length = RESPONSE_LENS[i]
        seq[-length - 1 : -1] = old[i, :length]  # log-prob of token t sits at position t - 1
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
