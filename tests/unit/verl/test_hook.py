"""The trainer's reward step on verl batches (no GPU): rollout order restored, views and vote groups tagged,
rewards mapped back to verl's balanced order; the per-sample GT manager; and the parts of verl's trainer and
worker the hooks rely on, checked against the installed verl so an upgrade that moves them fails here.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from transformers import PreTrainedTokenizerBase
from verl.experimental.reward_loop.reward_manager import get_reward_manager_cls as get_loop_manager
from verl.single_controller.base.decorator import MAGIC_ATTR
from verl.workers.reward_manager import get_reward_manager_cls

from corewarding.training.verl.hook import manager_input, reward_rows, rm_scores_for
from corewarding.training.verl.worker import LogitsStatisticsProbe


def test_pairs_vote_across_views_in_rollout_order_whatever_verl_reordered(
    make_training_batch: Callable, tokenizer: PreTrainedTokenizerBase
) -> None:
    batch = make_training_batch(["original", "rephrased"])
    manager = get_reward_manager_cls("corewarding_co_rewarding_1")(tokenizer=tokenizer)
    data, order = manager_input(batch, pairs=True)
    expected = rm_scores_for(manager(data, return_dict=True)["reward_tensor"], order)
    assert expected.sum(-1).tolist() == [0, 0, 1, 0, 0, 1, 1, 0, 0, 0, 1, 0, 0, 0, 0, 1]
    shuffled = batch.select_idxs(torch.tensor([9, 3, 14, 0, 7, 12, 1, 5, 10, 2, 15, 8, 4, 13, 6, 11]))
    data, order = manager_input(shuffled, pairs=True)
    assert list(data.non_tensor_batch["cr_group"][:4]) == ["pair-0"] * 4
    got = rm_scores_for(manager(data, return_dict=True)["reward_tensor"], order)
    torch.testing.assert_close(got, expected[torch.tensor([9, 3, 14, 0, 7, 12, 1, 5, 10, 2, 15, 8, 4, 13, 6, 11])])


def test_without_pairs_views_do_not_mix(make_training_batch: Callable) -> None:
    """Grouped by verl uid, Co-rewarding-I's views would not find each other's votes: the pair key is needed."""
    batch = make_training_batch(["original", "rephrased"])
    data, _ = manager_input(batch, pairs=False)
    assert len(set(data.non_tensor_batch["cr_group"])) == 4
    with pytest.raises(ValueError, match="cr_pair"):
        batch.non_tensor_batch["extra_info"] = np.asarray([{}] * len(batch), dtype=object)
        manager_input(batch, pairs=True)


def test_teacher_rows_join_the_policy_rows(
    make_training_batch: Callable, make_rollouts: Callable, tokenizer: PreTrainedTokenizerBase
) -> None:
    batch = make_training_batch(["original"])
    teacher = make_rollouts("teacher").data_proto(lambda u: f"{u}/original", lambda u: u)
    for key in ("cr_view", "cr_group"):
        teacher.non_tensor_batch.pop(key)
    data, order = manager_input(batch, teacher=teacher)
    assert len(data) == 16 and list(data.non_tensor_batch["cr_view"][8:]) == ["teacher"] * 8
    assert set(data.non_tensor_batch["cr_group"][8:]) == {"q0/original", "q1/original"}  # the policy's uids
    out = get_reward_manager_cls("corewarding_co_rewarding_2")(tokenizer=tokenizer)(data, return_dict=True)
    assert rm_scores_for(out["reward_tensor"], order).sum(-1).tolist() == [1, 1, 0, 0, 0, 0, 0, 0]


def test_teacher_rows_of_both_views_are_tagged_by_the_view_they_answer(
    make_training_batch: Callable, tokenizer: PreTrainedTokenizerBase
) -> None:
    """Co-rewarding-III: the teacher answered both views' prompts; its rows become teacher_original and
    teacher_rephrased, grouped by question, and label the other view."""
    batch = make_training_batch(["original", "rephrased"])
    answers = make_training_batch(["teacher_original", "teacher_rephrased"])
    teacher = answers.select_idxs(torch.arange(len(answers)))  # the teacher's rollouts: as verl returns them
    for i, extra in enumerate(teacher.non_tensor_batch["extra_info"]):  # ... answering the policy's prompts
        teacher.non_tensor_batch["extra_info"][i] = {**extra, "cr_view": extra["cr_view"].removeprefix("teacher_")}
    teacher.non_tensor_batch.pop("cr_row")
    shuffled = batch.select_idxs(torch.tensor([9, 3, 14, 0, 7, 12, 1, 5, 10, 2, 15, 8, 4, 13, 6, 11]))
    data, order = manager_input(shuffled, teacher=teacher, pairs=True, teacher_per_view=True)
    assert list(data.non_tensor_batch["cr_view"][16:]) == ["teacher_original"] * 8 + ["teacher_rephrased"] * 8
    assert list(data.non_tensor_batch["cr_group"][16:20]) == ["pair-0"] * 4
    out = get_reward_manager_cls("corewarding_co_rewarding_3")(tokenizer=tokenizer)(data, return_dict=True)
    in_rollout_order = [1, 1, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 1, 1, 1, 0]  # as the hand-computed verl test
    got = rm_scores_for(out["reward_tensor"], order).sum(-1).tolist()
    assert got == [in_rollout_order[i] for i in [9, 3, 14, 0, 7, 12, 1, 5, 10, 2, 15, 8, 4, 13, 6, 11]]


def test_gt_reward_loop_manager_scores_one_rollout(make_rollouts: Callable, tokenizer: PreTrainedTokenizerBase) -> None:
    manager = get_loop_manager("corewarding_gt")(config=OmegaConf.create({}), tokenizer=tokenizer, compute_score=None)
    data = make_rollouts("original").data_proto(lambda u: u, lambda u: u)
    run = manager.loop.run_until_complete  # verl runs managers on the loop they were built with
    scores = [run(manager.run_single(data[i : i + 1]))["reward_score"] for i in range(len(data))]
    assert scores == [1.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0]  # ground truths 5 and 8
    data.non_tensor_batch["reward_model"][0] = {"ground_truth": " "}
    assert run(manager.run_single(data[0:1]))["reward_score"] == 0.0


def test_self_certainty_probe_answers_both_engine_calls() -> None:
    logits = torch.zeros(1, 3, 4)
    out = LogitsStatisticsProbe(["self_certainty"])(student_logits=logits)
    torch.testing.assert_close(out["self_certainty"], torch.full((1, 3), float(np.log(4))))
    loss, metrics = LogitsStatisticsProbe(["self_certainty"])(
        model_output={}, data={"input_ids": torch.zeros(2)}, dp_group=None
    )
    assert float(loss) == 0.0 and metrics == {}


def test_verl_fit_calls_the_hooks_in_the_order_the_trainer_relies_on() -> None:
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer

    fit = inspect.getsource(RayPPOTrainer.fit)
    step = fit[fit.index("for batch_dict in self.train_dataloader:") :]
    position = 0
    for call in (
        "self._get_gen_batch(batch)", "generate_sequences(", "self.checkpoint_manager.sleep_replicas()",
        "self._balance_batch(batch", "extract_reward(batch)", "self._compute_old_log_prob(batch)",
        "self._compute_ref_log_prob(batch)", 'batch.batch["token_level_scores"] = reward_tensor', "compute_advantage(",
        "self._update_actor(batch)", "self.checkpoint_manager.update_weights(", "self._validate()",
    ):  # fmt: skip
        assert call in step[position:], f"verl's fit no longer calls {call} here"
        position += step[position:].index(call)
    assert "if self.config.trainer.balance_batch:" in step
    assert step.count("self._balance_batch(") == 1
    from verl.trainer.ppo.reward import extract_reward

    assert 'batch.batch["rm_scores"]' in inspect.getsource(extract_reward)


def test_verl_worker_update_weights_reads_the_actor_engine_the_teacher_swaps_in() -> None:
    from verl.workers.engine_workers import ActorRolloutRefWorker

    from corewarding.training.verl.worker import CorewardingWorker

    source = inspect.getsource(ActorRolloutRefWorker.update_weights)
    assert "self.actor.engine.get_per_tensor_param(" in source and "self.rollout.update_weights(" in source
    for name in (
        "corewarding_ema_update",
        "corewarding_teacher_to_rollout",
        "corewarding_log_prob_with_stats",
    ):
        assert hasattr(getattr(CorewardingWorker, name), MAGIC_ATTR)  # verl's @register marker


def test_verl_engine_passes_logits_to_the_probe_during_the_log_prob_pass() -> None:
    from verl.workers.engine.fsdp.transformer_impl import FSDPEngineWithLMHead
    from verl.workers.engine_workers import TrainingWorker

    outputs = inspect.getsource(FSDPEngineWithLMHead.prepare_model_outputs)
    assert outputs.count("logits_processor_func(student_logits=") == 2  # remove-padding and padded paths
    assert "_scale_logits_by_temperature" in outputs.split("logits_processor_func(student_logits=")[0]
    assert "self.loss_fn if compute_loss else None" in inspect.getsource(TrainingWorker.infer_batch)


def test_reward_rows_name_each_scored_row_with_its_texts(
    make_training_batch: Callable, make_rollouts: Callable, tokenizer: PreTrainedTokenizerBase
) -> None:
    """verl.reward_dump's rows: the teacher's rows after the policy's, each with its view, group, decoded response
    (the \\boxed answer it voted with) and the reward the manager gave it."""
    batch = make_training_batch(["original"])
    teacher = make_rollouts("teacher").data_proto(lambda u: f"{u}/original", lambda u: u)
    for key in ("cr_view", "cr_group"):
        teacher.non_tensor_batch.pop(key)
    data, _ = manager_input(batch, teacher=teacher)
    out = get_reward_manager_cls("corewarding_co_rewarding_2")(tokenizer=tokenizer)(data, return_dict=True)
    extra = out["reward_extra_info"]
    rows = reward_rows(data, extra["cr_reward"], extra["cr_rewarded"], tokenizer)
    assert [r["view"] for r in rows] == ["original"] * 8 + ["teacher"] * 8
    assert [r["reward"] for r in rows[:8]] == [1, 1, 0, 0, 0, 0, 0, 0]
    assert [r["rewarded"] for r in rows] == [True] * 8 + [False] * 8
    # q0's teacher votes 5 (three of four): the policy's two \boxed{5} answers are the rewarded ones
    assert rows[0]["group"] == "q0/original" and "\\boxed{5}" in rows[0]["response"]
    assert [r["response"] for r in rows[8:12]] == [f"so the answer is \\boxed{{{a}}}" for a in ["5", "6", "5", "5"]]
    assert [r["answer"] for r in rows] == ["5", "5", "6", "", "7", "8", "8", "7", "5", "6", "5", "5", "", "", "", ""]
    assert all(r["prompt"] and "<|im_start|>" not in r["prompt"] for r in rows)
    for row in rows:  # the tokens as scored: a test can recompute a row's logits from them
        assert tokenizer.decode(row["response_ids"], skip_special_tokens=True) == row["response"]
        assert tokenizer.decode(row["prompt_ids"], skip_special_tokens=True) == row["prompt"]
        assert "rollout_log_probs" not in row  # vLLM's log-probs only when the rollout computed them


def test_reward_rows_carry_vllms_sampled_log_probs_of_the_response_tokens(
    make_training_batch: Callable, tokenizer: PreTrainedTokenizerBase
) -> None:
    batch = make_training_batch(["original"])
    mask = batch.batch["response_mask"].float()
    steps = torch.arange(mask.shape[1], dtype=torch.float32)
    batch.batch["rollout_log_probs"] = -(torch.arange(len(batch))[:, None] + 1) * 0.1 - steps * 0.01
    data, order = manager_input(batch)
    rows = reward_rows(data, [0.0] * len(data), [True] * len(data), tokenizer)
    for row, source in zip(rows, order.tolist(), strict=True):
        kept = batch.batch["rollout_log_probs"][source][mask[source].bool()]
        assert row["rollout_log_probs"] == pytest.approx(kept.tolist())
        assert len(row["rollout_log_probs"]) == len(row["response_ids"])


def test_teacher_rows_without_a_uid_are_an_error_not_groups_of_their_own(
    make_training_batch: Callable, make_rollouts: Callable
) -> None:
    """verl's agent loop drops the input's columns; without the re-attach each teacher row would vote alone, every
    label would be empty and every reward 0 (make verl-e2e ran so, silently, before this check)."""
    batch = make_training_batch(["original"])
    teacher = make_rollouts("teacher").data_proto(lambda u: f"{u}/original", lambda u: u)
    for key in ("cr_view", "cr_group", "uid"):
        teacher.non_tensor_batch.pop(key)
    with pytest.raises(ValueError, match="teacher's rollouts have no uid column"):
        manager_input(batch, teacher=teacher)
