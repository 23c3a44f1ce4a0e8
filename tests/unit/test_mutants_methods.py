"""Tests written against the mutants mutmut left alive in the method cores (`make mutants`, docs/performance.md): the
votes and labels, the reward methods and the EMA schedule, each with hand-computed values on uneven inputs."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from types import SimpleNamespace

import pytest
import torch
from omegaconf import OmegaConf

from corewarding.methods import co_rewarding_1, co_rewarding_2, co_rewarding_3, gt_grpo, majority_voting
from corewarding.methods.base import (
    GroupLabel,
    Rollout,
    Scored,
    ScoreResult,
    group_indices,
    groups_by_view,
    has_ground_truth,
)
from corewarding.methods.co_rewarding_2 import ema_rate
from corewarding.methods.cross_vote import score_by_vote
from corewarding.methods.grpo import grpo_advantages
from corewarding.methods.logits_rewards import (
    chunked_over_tokens,
    masked_sequence_mean,
    token_entropy,
    token_self_certainty,
)
from corewarding.methods.summary import label_accuracy, nonempty_label_rate, summarize, vote_agreement
from corewarding.methods.voting import Voter, voter_from_config


def box(answer: str) -> str:
    return f"so \\boxed{{{answer}}}" if answer else "no box"


def rows(view: str, answers: list[str], uid: str = "u", truth: str | None = None) -> list[Rollout]:
    return [Rollout(uid, view, box(a), truth) for a in answers]


def columns(result: ScoreResult) -> tuple[list[int], list[float], list[str | None]]:
    return result.indices, result.rewards, result.labels


class FakeChecker:
    """A MathVerifyChecker stand-in: ``same(answer, gold)`` decides, every call is recorded."""

    def __init__(self, same: Callable[[str, str], bool]) -> None:
        self.same = same
        self.calls: list[list[tuple[str, str]]] = []
        self.stats: Counter[str] = Counter({"ok": 5, "timeout": 2})
        self.closed = 0

    def equivalent_many(self, pairs: list[tuple[str, str]]) -> list[SimpleNamespace]:
        self.calls.append(list(pairs))
        return [SimpleNamespace(equal=self.same(a, b)) for a, b in pairs]

    def close(self) -> None:
        self.closed += 1


def numerically_equal(a: str, b: str) -> bool:
    return float(a) == float(b)


# ---- votes and labels ----------------------------------------------------------------------------------------------
def test_a_voter_checks_its_mode_and_keeps_its_checker() -> None:
    assert (Voter().mode, Voter().checker) == ("exact", None)
    assert Voter("normalized").mode == "normalized"
    with pytest.raises(
        ValueError, match=r"^vote\.canonicalize='fuzzy'; expected one of exact, normalized, math_verify$"
    ):
        Voter("fuzzy")
    with pytest.raises(ValueError, match=r"^vote\.canonicalize=math_verify needs a MathVerifyChecker$"):
        Voter("math_verify")
    checker = FakeChecker(numerically_equal)
    voter = Voter("math_verify", checker)  # type: ignore[arg-type]
    assert voter.mode == "math_verify" and voter.checker is checker
    assert voter.checker_counts() == {"ok": 5, "timeout": 2} and Voter().checker_counts() == {}
    voter.close()
    Voter().close()  # no checker: nothing to stop
    assert checker.closed == 1


def test_voter_from_config_builds_the_configured_checker() -> None:
    exact = voter_from_config(OmegaConf.create({"canonicalize": "exact", "math_verify_timeout_s": 2.5}))
    assert (exact.mode, exact.checker) == ("exact", None)
    cfg = {"canonicalize": "math_verify", "math_verify_workers": 3, "math_verify_timeout_s": 2.5}
    voter = voter_from_config(OmegaConf.create(cfg))  # the checker's workers start on first use only
    assert voter.mode == "math_verify" and voter.checker is not None
    assert (voter.checker.workers, voter.checker.timeout_s) == (3, 2.5)
    voter.close()


def test_exact_votes_skip_missing_and_blank_answers() -> None:
    label, matches = Voter().vote_and_match(["4", None, "3", " ", "3", ""], ["3", "4", " ", "", "3 "])  # type: ignore[list-item]
    assert (label, matches) == ("3", [True, False, False, False, False])
    assert Voter().vote_and_match(["", "\t"], ["1", ""]) == (None, [False, False])
    assert Voter().vote_and_match(["9"], []) == ("9", [])


def test_normalized_votes_count_forms_keep_the_first_spelling_and_fall_back_to_the_raw_string() -> None:
    voter = Voter("normalized")
    # 0.5, \frac12 and 1/2 are one answer (\frac{1}{2}) with three votes against 3's two; the first spelling labels
    label, matches = voter.vote_and_match(["3", "0.5", "\\frac12", "3", "1/2"], ["\\dfrac{1}{2}", "3", "", " ", "\\!"])
    assert (label, matches) == ("0.5", [True, False, False, False, False])
    # strip_string raises on a dangling \frac: the raw string is the key, and it still votes and matches
    assert voter.vote_and_match(["\\frac", "7", "\\frac"], ["\\frac", "7"]) == ("\\frac", [True, False])
    assert voter.vote_and_match(["\\!", "a="], ["\\!", "3"]) == (None, [False, False])  # both normalise to ""
    assert voter.vote_and_match([" ", ""], ["3"]) == (None, [False])


def test_math_verify_votes_join_the_first_equivalent_representative_and_ask_each_pair_once() -> None:
    checker = FakeChecker(numerically_equal)
    voter = Voter("math_verify", checker)  # type: ignore[arg-type]
    label, matches = voter.vote_and_match(["7", "2", "", "2.0", "7.0", "2"], ["2.00", "7", "", " ", "2"])
    # 2, 2.0 and 2 are three votes for "2" (the first seen of them), 7 and 7.0 two for "7"
    assert (label, matches) == ("2", [True, False, False, False, True])
    assert checker.calls == [
        [("2", "7"), ("2.0", "7"), ("2.0", "2"), ("7.0", "7"), ("7.0", "2"), ("7.0", "2.0")],
        [("2.00", "2"), ("7", "2"), ("2", "2")],  # the blank targets are never sent
    ]
    assert voter.vote_and_match(["", " "], ["2"]) == (None, [False])
    assert len(checker.calls) == 2  # an empty vote asks nothing


def test_math_verify_votes_join_only_representatives() -> None:
    """A checker that is not transitive (within 1 of each other): 2 joins 1, so 3 (within 1 of 2, not of 1) must
    start a group of its own instead of joining 2, which represents nothing."""
    checker = FakeChecker(lambda a, b: abs(float(a) - float(b)) <= 1)
    label, matches = Voter("math_verify", checker).vote_and_match(["3", "1", "2", "3", "3"], ["1", "2", "3", "4"])
    assert label == "3"  # 3: three votes; 1: two (1 and 2)
    assert matches == [False, True, True, True]  # equivalence to the label, as the checker says


def test_score_by_vote_builds_groups_counts_missing_truths_and_keeps_input_order() -> None:
    batch = [
        Rollout("b", "rephrased", box("4"), "4"),
        Rollout("a", "original", box("1"), "1"),
        Rollout("b", "original", box("4"), " "),
        Rollout("a", "rephrased", box("1"), None),
        Rollout("a", "original", box("2"), "1"),
        Rollout("a", "rephrased", box("1"), None),
        Rollout("c", "original", box("5"), "5"),  # c has no rephrased rollouts: no vote, no label
    ]
    result = co_rewarding_1.score(batch)
    assert columns(result) == (
        [0, 1, 2, 3, 4, 5, 6],
        [1.0, 1.0, 1.0, 1.0, 0.0, 1.0, 0.0],
        ["4", "1", "4", "1", "1", "1", None],
    )
    assert result.groups == [
        GroupLabel("a", "original", "1", "1", 1, 2),
        GroupLabel("b", "original", "4", " ", 1, 1),
        GroupLabel("c", "original", None, "5", 0, 1),
        GroupLabel("b", "rephrased", "4", "4", 1, 1),
        GroupLabel("a", "rephrased", "1", None, 2, 2),  # the originals' 1-2 tie goes to 1
    ]
    assert result.missing_ground_truth == 3  # b's blank original, a's two rephrasings without a truth
    # a rollout of a view two pairs reward is missing twice; views no pair rewards are not counted
    twice = score_by_vote(batch, Voter(), [("original", "rephrased"), ("original", "original")])
    assert twice.missing_ground_truth == 2


def test_two_rows_out_of_order_are_put_back() -> None:
    """The rephrased row comes first in the input, its group second in the scoring: indices [1, 0] swap back."""
    result = co_rewarding_1.score([Rollout("u", "rephrased", box("6")), Rollout("u", "original", box("5"))])
    assert columns(result) == ([0, 1], [0.0, 0.0], ["5", "6"])
    result = co_rewarding_1.score([Rollout("u", "rephrased", box("6")), Rollout("u", "original", box("6"))])
    assert columns(result) == ([0, 1], [1.0, 1.0], ["6", "6"])


def test_every_text_method_uses_the_voter_it_is_given() -> None:
    """Exact votes tell 0.5 from \\frac12; normalized ones do not, and each method must use the voter it is given."""
    halves = ["0.5", "\\frac12", "7", "7", "1/2"]
    normalized = Voter("normalized")
    assert majority_voting.score(rows("original", halves)).rewards == [0.0, 0.0, 1.0, 1.0, 0.0]
    assert majority_voting.score(rows("original", halves), normalized).rewards == [1.0, 1.0, 0.0, 0.0, 1.0]
    pair = rows("original", ["1/2", "8", "1/2"]) + rows("rephrased", halves)
    assert co_rewarding_1.score(pair).rewards == [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]
    assert co_rewarding_1.score(pair, normalized).rewards == [1.0, 0.0, 1.0, 1.0, 1.0, 0.0, 0.0, 1.0]
    teacher = rows("original", ["1/2", "7"]) + rows("teacher", halves)
    assert co_rewarding_2.score(teacher).rewards == [0.0, 1.0]
    assert co_rewarding_2.score(teacher, normalized).rewards == [1.0, 0.0]
    three = rows("original", ["1/2", "7"]) + rows("rephrased", ["7"]) + rows("teacher_rephrased", halves)
    three += rows("teacher_original", ["7", "0.5"])
    assert co_rewarding_3.score(three).rewards == [0.0, 1.0, 1.0]
    assert co_rewarding_3.score(three, normalized).rewards == [1.0, 0.0, 1.0]


def test_label_statistics_by_hand() -> None:
    groups = [
        GroupLabel("a", "original", "3", "3", 2, 3),  # right
        GroupLabel("b", "original", "5", "6", 1, 4),  # wrong
        GroupLabel("c", "original", None, "2", 0, 2),  # no label: wrong
        GroupLabel("d", "original", "\\frac12", "0.5", 1, 1),  # right under the strict checker
        GroupLabel("e", "original", "9", " ", 1, 1),  # blank truth: left out of the accuracy
        GroupLabel("f", "original", "9", None, 0, 1),  # no truth: left out
    ]
    assert label_accuracy(groups) == 2 / 4
    assert label_accuracy(groups[4:]) is None and label_accuracy([]) is None
    assert nonempty_label_rate(groups) == 5 / 6 and nonempty_label_rate([]) == 0.0
    assert vote_agreement(groups) == 5 / 12 and vote_agreement([]) == 0.0
    result = ScoreResult([0, 1, 2, 3], [1.0, 0.0, 1.0, 1.0], ["3", "3", "5", None], groups, missing_ground_truth=4)
    assert summarize(result) == {
        "n": 4, "mean_reward": 0.75, "groups": 6, "nonempty_label_rate": 5 / 6, "label_accuracy": 0.5,
        "vote_agreement": 5 / 12, "missing_ground_truth": 4,
    }  # fmt: skip
    assert summarize(ScoreResult([], [], [])) == {
        "n": 0, "mean_reward": 0.0, "groups": 0, "nonempty_label_rate": 0.0, "label_accuracy": None,
        "vote_agreement": 0.0, "missing_ground_truth": 0,
    }  # fmt: skip


def test_groups_and_ground_truths_by_hand() -> None:
    batch = [Rollout("b", "original", ""), Rollout("a", "teacher", ""), Rollout("a", "original", "")]
    batch += [Rollout("b", "original", ""), Rollout("a", "original", "")]
    assert groups_by_view(batch) == {"original": {"b": [0, 3], "a": [2, 4]}, "teacher": {"a": [1]}}
    assert group_indices(batch, "original") == {"b": [0, 3], "a": [2, 4]} and group_indices(batch, "rephrased") == {}
    assert [has_ground_truth(t) for t in ("0", " 1 ", "", "\n", None)] == [True, True, False, False, False]
    result = ScoreResult.from_scored([Scored(4, 0.0, None), Scored(1, 1.0, "x")], missing=2)
    assert columns(result) == ([4, 1], [0.0, 1.0], [None, "x"]) and result.groups == []
    assert result.missing_ground_truth == 2
    groups = [GroupLabel("a", "original", "x", "x", 1, 1)]
    assert (
        ScoreResult.from_scored([], groups).groups == groups and ScoreResult.from_scored([]).missing_ground_truth == 0
    )


# ---- reward methods ------------------------------------------------------------------------------------------------
def test_gt_grpo_groups_labels_and_order_by_hand() -> None:
    batch = [
        Rollout("b", "original", box("\\frac12"), "0.5"),
        Rollout("a", "original", box("3"), "3"),
        Rollout("b", "original", box("2"), "0.5"),
        Rollout("a", "rephrased", box("3"), "3"),  # not a view gt_grpo rewards
        Rollout("a", "original", box("3"), " "),
        Rollout("b", "original", box("0.5"), "0.5"),
        Rollout("c", "original", box("1"), None),
    ]
    result = gt_grpo.score(batch)
    assert columns(result) == (
        [0, 1, 2, 4, 5, 6],
        [1.0, 1.0, 0.0, 0.0, 1.0, 0.0],
        ["0.5", "3", "0.5", None, "0.5", None],
    )
    assert result.groups == [
        GroupLabel("b", "original", "0.5", "0.5", 2, 3),
        GroupLabel("a", "original", "3", "3", 1, 2),
        GroupLabel("c", "original", None, None, 0, 1),
    ]
    assert result.missing_ground_truth == 2
    blank_first = gt_grpo.score([Rollout("a", "original", box("3"), ""), Rollout("a", "original", box("3"), "3")])
    assert blank_first.groups == [GroupLabel("a", "original", None, "", 1, 2)]


def test_co_rewarding_3_view_metrics_by_hand() -> None:
    """Per view: the teacher label's non-empty rate, its accuracy, the pass rate, and the policy's own label's
    accuracy, on three questions with uneven outcomes."""
    batch = rows("original", ["1", "1", "2"], uid="p", truth="1") + rows(
        "rephrased", ["1", "3", "1"], uid="p", truth="1"
    )
    batch += rows("teacher_rephrased", ["1", "1"], uid="p") + rows("teacher_original", ["3", "3", "1"], uid="p")
    batch += rows("original", ["4"], uid="q", truth="5") + rows("rephrased", ["4", "5", "4"], uid="q", truth="5")
    batch += rows("teacher_rephrased", [""], uid="q") + rows("teacher_original", ["4"], uid="q")
    batch += rows("original", ["6", "6", "5"], uid="r", truth="6") + rows(
        "rephrased", ["7", "7", "5"], uid="r", truth="7"
    )
    batch += rows("teacher_rephrased", ["6"], uid="r") + rows("teacher_original", ["7"], uid="r")
    result = co_rewarding_3.score(batch)
    metrics = co_rewarding_3.view_metrics(batch, result, Voter())
    # original view, labelled by the teacher on x': p 1 (right, 2 of 3 agree), q none, r 6 (right, 2 of 3); the
    # policy's own labels (its vote on x'): p 1 (right), q 4 and r 7 (wrong)
    # rephrased view, labelled by the teacher on x: p 3, q 4 (wrong), r 7 (right), agreeing 1 + 2 + 2 of 9; the
    # policy's own labels (its vote on x): p 1 (right), q 4 and r 6 (wrong)
    assert metrics == pytest.approx({
        "ori_pseudo_nonempty_rate": 2 / 3, "ori_pseudo_acc": 2 / 3, "ori_pseudo_pass_rate": 4 / 7,
        "ori_policypseudo_acc": 1 / 3,
        "aug_pseudo_nonempty_rate": 1.0, "aug_pseudo_acc": 1 / 3, "aug_pseudo_pass_rate": 5 / 9,
        "aug_policypseudo_acc": 1 / 3,
    })  # fmt: skip


def test_grpo_advantages_epsilon_dtype_and_shape_checks() -> None:
    # std of (0, 2e-6) is sqrt(2) x 1e-6: the default epsilon (1e-6) is a large part of the denominator
    tiny = grpo_advantages(torch.tensor([0.0, 2e-6]), ["a", "a"])
    assert tiny.tolist() == pytest.approx([-1 / (math.sqrt(2) + 1), 1 / (math.sqrt(2) + 1)], rel=1e-4)
    wide = grpo_advantages(torch.tensor([3.0, 0.0, 1.0]), ["g", "h", "g"], epsilon=0.5)
    assert wide.tolist() == pytest.approx([1 / (math.sqrt(2) + 0.5), 0.0, -1 / (math.sqrt(2) + 0.5)])
    halves = grpo_advantages(torch.tensor([1.0, 2.0, 4.0], dtype=torch.bfloat16), [0, 0, 0], norm_by_std=False)
    assert halves.dtype == torch.float32 and halves.tolist() == pytest.approx([-4 / 3, -1 / 3, 5 / 3], abs=1e-6)
    with pytest.raises(ValueError, match=r"one group key each, got \(2, 1\) and 2"):
        grpo_advantages(torch.zeros(2, 1), ["a", "b"])
    with pytest.raises(ValueError, match=r"got \(3,\) and 2"):
        grpo_advantages(torch.zeros(3), ["a", "b"])


def test_logits_statistics_chunked_and_whole_agree_by_hand() -> None:
    logits = torch.tensor(
        [[[0.0, math.log(3.0)], [1.0, 1.0], [2.0, 0.0]], [[0.0, 0.0], [math.log(3.0), 0.0], [5.0, 1.0]]]
    )
    whole = token_self_certainty(logits, chunk_tokens=None)
    # logsumexp(z) - mean(z) per position, by hand for the first: log 4 - log(3) / 2
    assert whole[0, 0].item() == pytest.approx(math.log(4.0) - math.log(3.0) / 2)
    assert whole.shape == (2, 3) and whole.dtype == torch.float32
    for chunk in (0, -1, 1, 4, 5, 6, 100):
        assert torch.allclose(token_self_certainty(logits, chunk_tokens=chunk), whole)
    calls: list[int] = []

    def counted(z: torch.Tensor) -> torch.Tensor:
        calls.append(z.shape[0])
        return z.float().sum(-1)

    out = chunked_over_tokens(counted, logits.to(torch.bfloat16), 4)
    assert calls == [4, 2] and out.dtype == torch.float32 and out.shape == (2, 3)
    assert out.flatten().tolist() == pytest.approx([math.log(3.0), 2.0, 2.0, 0.0, math.log(3.0), 6.0], abs=0.02)
    calls.clear()
    chunked_over_tokens(counted, logits, 0)
    assert calls == [2]  # one call on the whole (2, 3, 2) logits
    h = -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))
    assert token_entropy(logits.to(torch.bfloat16))[0, :2].tolist() == pytest.approx([h, math.log(2.0)], abs=1e-2)
    assert token_entropy(logits).dtype == torch.float32


@pytest.fixture()
def float64_default():
    """torch's default dtype float64 for one test: what is fp32 by design must not follow it."""
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        torch.set_default_dtype(torch.float32)


def test_chunks_stay_fp32_on_the_logits_device_and_each_chunk_is_computed_on_its_own(
    float64_default: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    logits = torch.tensor([[[0.0, 1.0], [2.0, 0.0], [1.0, 1.0]], [[3.0, 0.0], [0.0, 0.0], [0.5, 2.0]]])
    assert logits.dtype == torch.float64
    out = chunked_over_tokens(lambda z: z.sum(-1), logits, 4)
    assert out.dtype == torch.float32 and out.flatten().tolist() == [1.0, 2.0, 2.0, 3.0, 0.0, 2.5]
    on_meta = chunked_over_tokens(lambda z: z.float().sum(-1), torch.zeros(2, 3, 4, device="meta"), 2)
    assert on_meta.device.type == "meta" and on_meta.shape == (2, 3)  # allocated where the logits are
    calls: list[int] = []

    def counted(fn: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[torch.Tensor], torch.Tensor]:
        def run(z: torch.Tensor) -> torch.Tensor:
            calls.append(z.shape[0])
            return fn(z)

        return run

    chunked_over_tokens(counted(lambda z: z.sum(-1)), logits, 1)
    assert calls == [1] * 6  # one position at a time
    from corewarding.methods import logits_rewards

    calls.clear()
    monkeypatch.setattr(logits_rewards, "_self_certainty", counted(logits_rewards._self_certainty))
    token_self_certainty(logits, chunk_tokens=4)
    assert calls == [4, 2]  # the chunk size it is given, not one go


def test_masked_sequence_mean_by_hand() -> None:
    values = torch.tensor([[1.0, 2.0, 6.0], [4.0, 8.0, 16.0], [3.0, 3.0, 3.0]], dtype=torch.float64)
    mask = torch.tensor([[1, 0, 1], [0, 1, 0], [0, 0, 0]])
    assert masked_sequence_mean(values, mask).tolist() == [3.5, 8.0, 0.0]
    assert masked_sequence_mean(values, mask).dtype == torch.float64
    # leading dimensions are kept: the mean runs over the last one only
    stacked = masked_sequence_mean(values.reshape(1, 3, 3).expand(2, 3, 3), mask.expand(2, 3, 3))
    assert stacked.tolist() == [[3.5, 8.0, 0.0], [3.5, 8.0, 0.0]]


# ---- the EMA schedule ----------------------------------------------------------------------------------------------
def test_ema_rate_by_hand() -> None:
    start, end = 0.2, 0.04  # a_k = end + (start - end)(1 + cos(pi t / K)) / 2, t = clip(k - 1, 0, K)
    assert ema_rate(1, 4, start, end) == pytest.approx(0.2)
    assert ema_rate(2, 4, start, end) == pytest.approx(0.04 + 0.08 * (1 + math.cos(math.pi / 4)))
    assert ema_rate(3, 4, start, end) == pytest.approx(0.12)
    assert ema_rate(4, 4, start, end) == pytest.approx(0.04 + 0.08 * (1 + math.cos(3 * math.pi / 4)))
    assert ema_rate(5, 4, start, end) == pytest.approx(0.04) and ema_rate(9, 4, start, end) == pytest.approx(0.04)
    assert ema_rate(0, 4, start, end) == pytest.approx(0.2) and ema_rate(-3, 4, start, end) == pytest.approx(0.2)
    assert ema_rate(2, 1, start, end) == pytest.approx(0.04)  # one step: t = K = 1 reaches the end
    assert ema_rate(3, 0, start, end) == pytest.approx(0.2)  # no steps: t stays 0
