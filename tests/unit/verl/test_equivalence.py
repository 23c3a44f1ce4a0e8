"""On the same rollouts (token ids, masks, log-probs), the verl plug-ins' rewards and advantages equal the local
backend's, for every method: real DataProto batches through verl's own lookups (get_reward_manager_cls,
get_adv_estimator_fn), against training.rewards.score_step + methods.grpo.grpo_advantages.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from transformers import PreTrainedTokenizerBase
from verl import DataProto
from verl.trainer.ppo.core_algos import get_adv_estimator_fn
from verl.utils.torch_functional import entropy_from_logits, logprobs_from_logits
from verl.workers.reward_manager import get_reward_manager_cls

from corewarding import methods
from corewarding.lm.rollout import RolloutBatch, token_logprobs
from corewarding.methods.grpo import grpo_advantages
from corewarding.methods.voting import Voter
from corewarding.training.rewards import score_step
from corewarding.training.verl.worker import LogitsStatisticsProbe

TEMPERATURE = 0.7
METHODS = [
    "gt_grpo", "majority_voting", "self_certainty", "entropy", "co_rewarding_1", "co_rewarding_2", "co_rewarding_3",
]  # fmt: skip


def verl_side_stats(model: torch.nn.Module, b: RolloutBatch) -> dict[str, torch.Tensor]:
    """What verl's log-prob pass computes from the logits: log-probs and entropy (verl's own functions) and the
    self-certainty probe's output, on the temperature-scaled logits of the response positions."""
    attention = torch.cat([b.prompt_mask, b.response_mask], dim=1)
    input_ids = torch.cat([b.prompt_ids, b.response_ids], dim=1)
    position_ids = (attention.cumsum(-1) - 1).clamp(min=0)
    with torch.no_grad():
        logits = model(input_ids=input_ids, attention_mask=attention, position_ids=position_ids).logits
    p, r = b.prompt_ids.shape[1], b.response_ids.shape[1]
    logits = logits[:, p - 1 : p - 1 + r, :].float() / TEMPERATURE
    return {
        "log_probs": logprobs_from_logits(logits, b.response_ids),
        "entropy": entropy_from_logits(logits),
        "self_certainty": LogitsStatisticsProbe(["self_certainty"])(student_logits=logits)["self_certainty"],
    }


def local_oracle(method: str, batches: dict[str, RolloutBatch]) -> tuple[dict[str, torch.Tensor], dict, dict]:
    spec = methods.get(method)
    rewards, metrics = score_step(spec, batches, Voter())
    advantages = {v: grpo_advantages(rewards[v], batches[v].uids) for v in spec.rewarded_views}
    return rewards, advantages, metrics


@pytest.mark.parametrize("method", METHODS)
def test_verl_rewards_and_advantages_equal_the_local_backend(
    method: str,
    make_rollouts: Callable,
    tokenizer: PreTrainedTokenizerBase,
    tiny_model: torch.nn.Module,
) -> None:
    spec = methods.get(method)
    rollouts = {view: make_rollouts(view) for view in spec.views}
    batches = {view: r.batch for view, r in rollouts.items()}
    if spec.kind == "logits":  # the local backend's own log-prob pass ...
        b = batches["original"]
        logp, stats = token_logprobs(tiny_model, b, slice(None), TEMPERATURE, ("entropy", "self_certainty"))
        b.stats = {"old_logp": logp, "entropy": stats["entropy"], "self_certainty": stats["self_certainty"]}
    rewards, advantages, metrics = local_oracle(method, batches)

    # verl rows: each view of a question has its own verl uid; Co-rewarding-I votes cross on the question
    parts = []
    for view, r in rollouts.items():
        part = r.data_proto(verl_uid=lambda u, v=view: f"{u}/{v}", group=lambda u: u)
        if spec.kind == "logits":  # ... and verl's, on the same tokens, agree to float rounding
            stat = str(spec.logits_statistic)
            stats = verl_side_stats(tiny_model, r.batch)
            torch.testing.assert_close(stats["log_probs"], r.batch.stats["old_logp"], rtol=0, atol=1e-5)
            torch.testing.assert_close(stats[stat], r.batch.stats[stat], rtol=0, atol=1e-5)
            # the rollouts' statistic itself: this tiny model's rewards differ by ~1e-4 within a group, so GRPO's
            # division by the group std would turn float-rounding noise into visible advantage differences
            part.batch["cr_token_stat"] = r.batch.stats[stat]
        parts.append(part)
    data = DataProto.concat(parts)
    manager = get_reward_manager_cls(f"corewarding_{method}")(tokenizer=tokenizer)
    result = manager(data, return_dict=True)
    manager.close()

    offset = 0
    for view, r in rollouts.items():
        n = len(r.batch.uids)
        rows = slice(offset, offset + n)
        offset += n
        if view not in spec.rewarded_views:
            assert torch.count_nonzero(result["reward_tensor"][rows]) == 0  # teacher rows earn nothing
            continue
        token_rewards = result["reward_tensor"][rows]
        torch.testing.assert_close(token_rewards.sum(-1), rewards[view].float(), rtol=0, atol=1e-5)
        adv_fn = get_adv_estimator_fn("grpo")
        mask = r.batch.response_mask.float()
        adv, _ = adv_fn(token_level_rewards=token_rewards, response_mask=mask, index=data.non_tensor_batch["uid"][rows])
        torch.testing.assert_close(adv, advantages[view].float().unsqueeze(-1) * mask, rtol=0, atol=1e-5)
    for key in ("label_accuracy", "nonempty_label_rate", "vote_agreement", "missing_ground_truth"):
        assert result["metrics"][key] == pytest.approx(metrics[key]), key
    assert {k: v for k, v in result["metrics"].items() if k.startswith(("ori_", "aug_"))} == {
        k: v for k, v in metrics.items() if k.startswith(("ori_", "aug_"))
    }  # Co-rewarding-III's per-view label metrics (none for the others)


def test_hand_computed_co_rewarding_rewards_through_verl(
    make_rollouts: Callable, tokenizer: PreTrainedTokenizerBase
) -> None:
    """Not only equal to the local backend: equal to the paper's rule, worked out by hand."""
    cr1 = [make_rollouts("original"), make_rollouts("rephrased")]
    data = DataProto.concat([r.data_proto(lambda u, v=r.view: f"{u}/{v}", lambda u: u) for r in cr1])
    out = get_reward_manager_cls("corewarding_co_rewarding_1")(tokenizer=tokenizer)(data, return_dict=True)
    # original q0 [5,5,6,-] vs rephrased vote 6; q1 [7,8,8,7] vs rephrased vote 8;
    # rephrased q0 [6,6,5,x] vs original vote 5; q1 [8,8,8,7] vs original vote 7 (a tie of 7 and 8; 7 seen first)
    assert out["reward_tensor"].sum(-1).tolist() == [0, 0, 1, 0, 0, 1, 1, 0, 0, 0, 1, 0, 0, 0, 0, 1]
    cr2 = [make_rollouts("original"), make_rollouts("teacher")]
    data = DataProto.concat([r.data_proto(lambda u, v=r.view: f"{u}/{v}", lambda u: u) for r in cr2])
    out = get_reward_manager_cls("corewarding_co_rewarding_2")(tokenizer=tokenizer)(data, return_dict=True)
    # teacher votes 5 for q0 and nothing for q1
    assert out["reward_tensor"].sum(-1).tolist() == [1, 1, 0, 0, 0, 0, 0, 0] + [0] * 8
    assert out["metrics"]["nonempty_label_rate"] == 0.5 and out["metrics"]["label_accuracy"] == 0.5


def test_hand_computed_co_rewarding_3_rewards_and_view_metrics_through_verl(
    make_rollouts: Callable, tokenizer: PreTrainedTokenizerBase
) -> None:
    """The teacher's vote on the other view labels each policy view: a tie, an empty vote, the cross pairing."""
    views = ["original", "rephrased", "teacher_original", "teacher_rephrased"]
    data = DataProto.concat(
        [make_rollouts(v).data_proto(lambda u, v=v: f"{u}/{v}", lambda u: u) for v in views]
    )  # fmt: skip
    out = get_reward_manager_cls("corewarding_co_rewarding_3")(tokenizer=tokenizer)(data, return_dict=True)
    # original q0 [5,5,6,-] vs the teacher's vote on x' (5); q1 vs its empty vote: all 0.
    # rephrased q0 [6,6,5,x] vs the teacher's vote on x (6); q1 [8,8,8,7] vs 8 (a tie of 8 and 7, 8 seen first)
    assert out["reward_tensor"].sum(-1).tolist() == [1, 1, 0, 0, 0, 0, 0, 0] + [1, 1, 0, 0, 1, 1, 1, 0] + [0] * 16
    m = out["metrics"]
    # ori: labels 5 (right) and none; 2 of 8 rollouts match. Policy's own cross-view labels: 6 (wrong), 8 (right)
    assert (m["ori_pseudo_nonempty_rate"], m["ori_pseudo_acc"], m["ori_pseudo_pass_rate"]) == (0.5, 0.5, 0.25)
    assert m["ori_policypseudo_acc"] == 0.5
    # aug: labels 6 (wrong) and 8 (right); 5 of 8 match. Policy's own: 5 (right), 7 (the tie's first: wrong)
    assert (m["aug_pseudo_nonempty_rate"], m["aug_pseudo_acc"], m["aug_pseudo_pass_rate"]) == (1.0, 0.5, 0.625)
    assert m["aug_policypseudo_acc"] == 0.5


def test_a_logits_method_without_its_statistic_is_an_error(
    make_rollouts: Callable, tokenizer: PreTrainedTokenizerBase
) -> None:
    data = make_rollouts("original").data_proto(lambda u: u, lambda u: u)
    with pytest.raises(ValueError, match="per-token entropy"):
        get_reward_manager_cls("corewarding_entropy")(tokenizer=tokenizer)(data, return_dict=True)
    with pytest.raises(ValueError, match="needs rollouts of view"):
        get_reward_manager_cls("corewarding_co_rewarding_2")(tokenizer=tokenizer)(data, return_dict=True)


def test_co_rewarding_1_loss_is_a_token_mean_over_both_views_half_the_references_sum() -> None:
    """The documented difference: the reference sums each view's token-mean; verl, trained on the concatenated
    batch, takes one token-mean over both views (verl's agg_loss). Equal token counts: exactly half; unequal
    ones: the longer view weighs more."""
    from verl.trainer.ppo.core_algos import agg_loss

    from corewarding.training.local.losses import masked_token_mean

    torch.manual_seed(0)
    ori, aug = torch.randn(4, 6), torch.randn(4, 6)
    same = torch.ones(4, 6)
    reference = masked_token_mean(ori, same) + masked_token_mean(aug, same)
    concat = agg_loss(torch.cat([ori, aug]), torch.cat([same, same]), "token-mean")
    torch.testing.assert_close(concat, reference / 2)
    short = torch.zeros(4, 6)
    short[:, :2] = 1  # the rephrased view answers in 2 tokens, the original in 6
    m_ori, m_aug = masked_token_mean(ori, same), masked_token_mean(aug, short)
    concat = agg_loss(torch.cat([ori, aug]), torch.cat([same, short]), "token-mean")
    torch.testing.assert_close(concat, (24 * m_ori + 8 * m_aug) / 32)
