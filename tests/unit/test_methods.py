"""Hand-computed rewards for every method core, including the edge cases of methods.md section 2."""

from __future__ import annotations

import math

import pytest
import torch

from corewarding import methods
from corewarding.config import config_dir, load_methods
from corewarding.methods import co_rewarding_1, co_rewarding_2, co_rewarding_3, gt_grpo, majority_voting
from corewarding.methods.base import Rollout
from corewarding.methods.registry import MethodSpec, register
from corewarding.methods.summary import summarize
from corewarding.methods.voting import Voter


def box(answer: str) -> str:
    return f"Reasoning... so the answer is \\boxed{{{answer}}}."


def rows(view: str, answers: list[str], uid: str = "u", truth: str | None = None) -> list[Rollout]:
    return [Rollout(uid, view, box(a) if a != "NONE" else "no box here", truth) for a in answers]


def rewards(result) -> list[float]:
    return [s.reward for s in result.scored]


def test_the_registry_holds_the_rewards_of_the_method_configs_and_refuses_duplicates() -> None:
    """Every registered method has configs/method/<name>.yaml rewarding with it, and every method YAML rewards with
    a registered method whose views (less the teacher's) it lists; variants (the ablations) reuse a reward."""
    options = sorted(p.stem for p in (config_dir() / "method").glob("*.yaml"))
    read = load_methods(options)
    assert {m.name for m in read.values()} == set(options)  # each file's name is its option's
    assert {m.reward for m in read.values()} == set(methods.names())
    assert all(read[name].reward == name for name in methods.names())
    variants = {m.name: m.reward for m in read.values() if m.name != m.reward}
    assert variants == {
        "co_rewarding_2_frozen_teacher": "co_rewarding_2", "majority_voting_rephrased": "majority_voting",
    }  # fmt: skip
    assert {m.name: m.views for m in read.values() if m.views != ("original",)} == {
        "co_rewarding_1": ("original", "rephrased"), "co_rewarding_3": ("original", "rephrased"),
    }  # fmt: skip
    assert methods.get("co_rewarding_2").question_views == ("original",)  # its "teacher" view is not a question's
    with pytest.raises(ValueError, match="already registered"):
        register(MethodSpec("gt_grpo", "text", ("original",), ("original",)))
    with pytest.raises(KeyError, match=f'known: {", ".join(methods.names())}"'):
        methods.get("ppo")


def test_gt_reward_uses_the_strict_reference_checker() -> None:
    batch = rows("original", ["\\dfrac12", "0.5", "1/2", "2", "NONE"], truth="\\frac{1}{2}")
    result = gt_grpo.score(batch)
    assert rewards(result) == [1.0, 1.0, 1.0, 0.0, 0.0]
    assert {s.label for s in result.scored} == {"\\frac{1}{2}"}


def test_gt_reward_without_ground_truth_is_zero_and_counted() -> None:
    batch = rows("original", ["7", "7"], uid="a", truth=None) + rows("original", ["7"], uid="b", truth="7")
    result = gt_grpo.score(batch)
    assert rewards(result) == [0.0, 0.0, 1.0]
    assert result.missing_ground_truth == 2
    assert [s.label for s in result.scored] == [None, None, "7"]


def test_blank_ground_truth_counts_as_missing() -> None:
    result = gt_grpo.score([Rollout("u", "original", "\\boxed{}", ""), Rollout("u", "original", "\\boxed{ }", " ")])
    assert rewards(result) == [0.0, 0.0] and result.missing_ground_truth == 2


def test_normalized_votes_ignore_answers_that_normalise_to_nothing() -> None:
    label, matches = Voter("normalized").vote_and_match(["\\!", "\\!", "5"], ["\\$", " \n", "5"])
    assert label == "5" and matches == [False, False, True]


def test_float_string_ground_truth_never_matches_under_strict_gt() -> None:
    # the AMC caveat of methods.md section 2: "142.0" never equals "142" with the reference checker
    assert rewards(gt_grpo.score(rows("original", ["142"], truth="142.0"))) == [0.0]


def test_majority_vote_ties_go_to_the_answer_seen_first() -> None:
    result = majority_voting.score(rows("original", ["3", "4", "4", "3", "5"]))
    assert [s.label for s in result.scored] == ["3"] * 5
    assert rewards(result) == [1.0, 0.0, 0.0, 1.0, 0.0]


def test_majority_vote_drops_empty_answers_and_empty_groups_get_zero() -> None:
    result = majority_voting.score(rows("original", ["NONE", " ", "NONE", "9"]))
    assert rewards(result) == [0.0, 0.0, 0.0, 1.0]
    assert result.scored[0].label == "9"
    empty = majority_voting.score(rows("original", ["NONE", "NONE", " "]))
    assert rewards(empty) == [0.0, 0.0, 0.0]
    assert {s.label for s in empty.scored} == {None}


def test_exact_votes_keep_raw_strings_apart() -> None:
    # reference behaviour: "\frac12", "\dfrac{1}{2}" and "0.5" are three different votes
    result = majority_voting.score(rows("original", ["\\frac12", "0.5", "\\dfrac{1}{2}", "7", "7"]))
    assert result.scored[0].label == "7"
    assert rewards(result) == [0.0, 0.0, 0.0, 1.0, 1.0]


def test_normalized_votes_merge_equivalent_forms() -> None:
    result = majority_voting.score(
        rows("original", ["\\frac12", "0.5", "\\dfrac{1}{2}", "7", "7"]), Voter("normalized")
    )
    assert result.scored[0].label == "\\frac12"
    assert rewards(result) == [1.0, 1.0, 1.0, 0.0, 0.0]


def test_math_verify_votes_merge_float_strings() -> None:
    from corewarding.grading.equivalence import MathVerifyChecker

    with MathVerifyChecker(workers=1, timeout_s=10.0) as checker:
        result = majority_voting.score(
            rows("original", ["142", "142.0", "7", "7", "142"]), Voter("math_verify", checker)
        )
    assert result.scored[0].label == "142"
    assert rewards(result) == [1.0, 1.0, 0.0, 0.0, 1.0]


def test_co_rewarding_1_rewards_each_view_with_the_other_views_vote() -> None:
    batch = rows("original", ["5", "5", "6", "NONE"], uid="q1") + rows("rephrased", ["6", "6", "5"], uid="q1")
    batch += rows("original", ["1", "2"], uid="q2") + rows("rephrased", ["NONE", " "], uid="q2")
    result = co_rewarding_1.score(batch)
    by_index = {s.index: (s.reward, s.label) for s in result.scored}
    # q1 originals are scored against the rephrased vote "6"; q1 rephrasings against the original vote "5"
    assert [by_index[i] for i in range(4)] == [(0.0, "6"), (0.0, "6"), (1.0, "6"), (0.0, "6")]
    assert [by_index[i] for i in range(4, 7)] == [(0.0, "5"), (0.0, "5"), (1.0, "5")]
    # q2: the rephrased view has no answer, so the originals get no label; the rephrasings vote "1" (first seen)
    assert [by_index[i] for i in (7, 8)] == [(0.0, None), (0.0, None)]
    assert [by_index[i] for i in (9, 10)] == [(0.0, "1"), (0.0, "1")]
    assert [s.index for s in result.scored] == list(range(11))


def test_co_rewarding_2_rewards_policy_with_the_teacher_vote() -> None:
    batch = rows("original", ["1", "2", "2"], uid="q", truth="2") + rows("teacher", ["2", "NONE", "2", "1"], uid="q")
    result = co_rewarding_2.score(batch)
    assert [s.index for s in result.scored] == [0, 1, 2]  # teacher rows are not rewarded
    assert rewards(result) == [0.0, 1.0, 1.0]
    summary = summarize(result)
    assert summary["label_accuracy"] == 1.0
    assert summary["nonempty_label_rate"] == 1.0
    assert summary["vote_agreement"] == pytest.approx(2 / 3)


def test_co_rewarding_3_labels_each_view_with_the_teachers_vote_on_the_other() -> None:
    batch = rows("original", ["5", "6", "5"], uid="q", truth="5") + rows("rephrased", ["6", "5"], uid="q", truth="5")
    batch += rows("teacher_original", ["6", "5", "5", "6"], uid="q")  # a tie: 6 seen first
    batch += rows("teacher_rephrased", ["5", "NONE", "5", "7"], uid="q")
    batch += rows("original", ["1"], uid="r", truth="1") + rows("rephrased", ["1"], uid="r", truth="1")
    batch += rows("teacher_original", ["1"], uid="r") + rows("teacher_rephrased", ["NONE", " "], uid="r")
    result = co_rewarding_3.score(batch)
    by_index = {s.index: (s.reward, s.label) for s in result.scored}
    assert sorted(by_index) == [0, 1, 2, 3, 4, 13, 14]  # the policy's rows only
    # q: originals against the teacher's vote on the rephrasing (5); rephrasings against its vote on the original,
    # a 2-2 tie that goes to 6; r: the teacher has no answer on the rephrasing, so the original earns nothing
    assert [by_index[i] for i in (0, 1, 2)] == [(1.0, "5"), (0.0, "5"), (1.0, "5")]
    assert [by_index[i] for i in (3, 4)] == [(1.0, "6"), (0.0, "6")]
    assert by_index[13] == (0.0, None) and by_index[14] == (1.0, "1")
    metrics = co_rewarding_3.view_metrics(batch, result, Voter())
    assert metrics == {
        "ori_pseudo_nonempty_rate": 0.5, "ori_pseudo_acc": 0.5, "ori_pseudo_pass_rate": 0.5,
        "ori_policypseudo_acc": 0.5,  # the policy's own vote on the rephrasing: q 6 (a tie, wrong), r 1
        "aug_pseudo_nonempty_rate": 1.0, "aug_pseudo_acc": 0.5, "aug_pseudo_pass_rate": 2 / 3,
        "aug_policypseudo_acc": 1.0,  # the policy's own vote on the original: q 5, r 1
    }  # fmt: skip


def test_summary_label_accuracy_counts_empty_labels_as_wrong() -> None:
    batch = rows("original", ["3", "3"], uid="a", truth="3") + rows("original", ["NONE"], uid="b", truth="4")
    batch += rows("original", ["9"], uid="c", truth=None)
    summary = summarize(majority_voting.score(batch))
    assert summary["label_accuracy"] == 0.5  # a right, b empty; c has no ground truth
    assert summary["nonempty_label_rate"] == pytest.approx(2 / 3)
    assert summary["n"] == 4 and summary["mean_reward"] == 0.75


def test_grpo_advantages_hand_computed() -> None:
    from corewarding.methods.grpo import grpo_advantages

    # group a: mean 0.25, unbiased std 0.5 -> (1.5, -0.5, -0.5, -0.5); group b equal rewards -> 0; c singleton
    scores = torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 3.0])
    adv = grpo_advantages(scores, ["a", "a", "a", "a", "b", "b", "c"])
    expected = [1.5, -0.5, -0.5, -0.5, 0.0, 0.0, 3.0]
    assert adv.tolist() == pytest.approx(expected, abs=1e-5)
    assert torch.isfinite(grpo_advantages(torch.zeros(3), ["x"] * 3)).all()


def test_entropy_and_self_certainty_rewards_hand_computed() -> None:
    from corewarding.methods import entropy, self_certainty
    from corewarding.methods.logits_rewards import token_entropy, token_self_certainty

    logits = torch.tensor([[[0.0, math.log(3.0)], [0.0, 0.0]]])  # p = (1/4, 3/4), then uniform
    mask = torch.tensor([[1, 0]])
    h = -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))
    assert entropy.sequence_reward(token_entropy(logits), mask).item() == pytest.approx(-h, abs=1e-6)
    certainty = math.log(4.0) - math.log(3.0) / 2
    assert self_certainty.sequence_reward(token_self_certainty(logits), mask).item() == pytest.approx(certainty)
    empty = torch.zeros(1, 2, dtype=torch.long)
    assert entropy.sequence_reward(token_entropy(logits), empty).item() == 0.0
