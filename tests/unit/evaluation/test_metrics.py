"""Benchmark metrics and their bootstrap intervals (corewarding.evaluation.metrics), against hand-computed values."""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest

from corewarding.evaluation.metrics import MetricValue, compute_metric, maj_correct, pass_at_k, problem_scores

T, F = True, False


def brute_pass_at_k(n: int, c: int, k: int) -> float:
    """The fraction of the k-subsets of n samples (c of them correct) holding at least one correct sample."""
    samples = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    return sum(any(samples[i] for i in subset) for subset in subsets) / len(subsets)


@pytest.mark.parametrize("n", range(1, 8))
def test_pass_at_k_equals_the_enumeration(n: int) -> None:
    for c in range(n + 1):
        for k in range(1, n + 1):
            assert pass_at_k(n, c, k) == pytest.approx(brute_pass_at_k(n, c, k), abs=1e-12), (n, c, k)


def test_pass_at_k_is_stable_for_large_n() -> None:
    assert pass_at_k(1000, 1, 1) == pytest.approx(0.001)
    assert pass_at_k(1000, 1, 500) == pytest.approx(0.5)
    assert pass_at_k(1000, 0, 1000) == 0.0
    assert pass_at_k(1000, 600, 401) == 1.0


@pytest.mark.parametrize(("n", "c", "k"), [(4, 1, 0), (4, 1, 5), (4, 5, 2), (4, -1, 2)])
def test_pass_at_k_rejects_bad_arguments(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


CORRECT = [
    [T, F, T, T],  # c = 3
    [F, F, F, F],  # c = 0
    [F, F, T, F],  # c = 1
]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("pass@1", (3 / 4 + 0 + 1 / 4) / 3),
        ("avg@1", (1 + 0 + 0) / 3),  # the first sample only
        ("avg@2", (1 / 2 + 0 + 0) / 3),
        ("avg@4", (3 / 4 + 0 + 1 / 4) / 3),
        ("pass@2", (1 + 0 + (1 - 3 / 6)) / 3),  # 1 - C(3,2)/C(4,2) = 1/2 for c = 1
        ("pass@3", (1 + 0 + (1 - 1 / 4)) / 3),  # 1 - C(3,3)/C(4,3) = 3/4
        ("pass@4", (1 + 0 + 1) / 3),
    ],
)
def test_metric_values_by_hand(name: str, expected: float) -> None:
    assert compute_metric(name, CORRECT, bootstrap=0) == MetricValue(pytest.approx(expected), None, None)


def test_maj_at_k_by_hand() -> None:
    correct = [
        [F, T, T, F],  # "2" wins 2-1 over "1" (and the blank is not a vote)
        [F, T, T, F],  # a 2-2 tie: "1" is seen first and is wrong
        [T, F, F, F],  # no non-empty answer at all
        [F, T, F, F],  # "5" by 2 votes, judged by its first sample (index 1: correct)
        [T, F, F, T],  # maj@2 sees only "9", "8": a tie, "9" first; maj@4 sees "8" twice
    ]
    answers = [
        ["1", "2", "2", " "],
        ["1", "2", "2", "1"],
        ["", " ", "", "\n"],
        ["4", "5", "5", "6"],
        ["9", "8", "7", "8"],
    ]
    assert [maj_correct(c, a, 4) for c, a in zip(correct, answers, strict=True)] == [T, F, F, T, F]
    assert [maj_correct(c, a, 2) for c, a in zip(correct, answers, strict=True)] == [F, F, F, F, T]
    assert compute_metric("maj@4", correct, answers, bootstrap=0).value == pytest.approx(2 / 5)
    assert compute_metric("maj@2", correct, answers, bootstrap=0).value == pytest.approx(1 / 5)


def test_maj_votes_compare_raw_strings() -> None:
    # "\\frac12", "0.5" and "1/2" are different votes, as in the reference majority vote
    assert not maj_correct([T, T, T, F, F], ["\\frac12", "0.5", "1/2", "3", "3"], 5)


def _scores(problems: int, seed: int) -> list[list[bool]]:
    rng = np.random.default_rng(seed)
    return (rng.random((problems, 8)) < rng.random((problems, 1))).tolist()


def test_bootstrap_interval_contains_the_value_and_is_deterministic() -> None:
    correct = _scores(200, seed=1)
    first = compute_metric("pass@1", correct, bootstrap=500, seed=7)
    assert first.ci_low is not None and first.ci_high is not None
    assert first.ci_low < first.value < first.ci_high
    assert compute_metric("pass@1", correct, bootstrap=500, seed=7) == first
    assert compute_metric("pass@1", correct, bootstrap=500, seed=8) != first
    wider = compute_metric("pass@1", correct, bootstrap=500, seed=7, confidence=0.99)
    assert wider.ci_low is not None and wider.ci_high is not None
    assert wider.ci_low <= first.ci_low and wider.ci_high >= first.ci_high


def test_bootstrap_width_shrinks_with_more_problems() -> None:
    few = _scores(50, seed=2)
    many = few * 16  # the same mix of problems, 16 times as many
    narrow, broad = compute_metric("pass@4", many, seed=0), compute_metric("pass@4", few, seed=0)
    assert narrow.value == pytest.approx(broad.value)
    assert narrow.ci_high - narrow.ci_low < (broad.ci_high - broad.ci_low) / 2  # ~ 1/sqrt(16)


def test_bootstrap_of_a_constant_is_a_point() -> None:
    value = compute_metric("avg@2", [[T, T]] * 30, seed=3)
    assert value == MetricValue(1.0, 1.0, 1.0)


def test_bootstrap_resamples_problems_with_replacement() -> None:
    # two problems scoring 0 and 1: resampled means are 0, 0.5 or 1 with probabilities 1/4, 1/2, 1/4
    value = compute_metric("pass@1", [[F], [T]], bootstrap=4000, confidence=0.9, seed=0)
    assert (value.value, value.ci_low, value.ci_high) == (0.5, 0.0, 1.0)
    assert compute_metric("pass@1", [[F], [T]], bootstrap=4000, confidence=0.4).ci_low == 0.5


@pytest.mark.parametrize("name", ["pass@0", "foo@3", "pass@5", "avg@9", "maj", "pass@x", "pass@-1", "Pass@1"])
def test_bad_metric_names_are_named(name: str) -> None:
    with pytest.raises(ValueError, match=re.escape(repr(name))):
        compute_metric(name, CORRECT, [["1"] * 4] * 3)


def test_bad_inputs() -> None:
    with pytest.raises(ValueError, match="needs the extracted answers"):
        compute_metric("maj@2", CORRECT)
    with pytest.raises(ValueError, match="problem 1 has 3 samples"):
        compute_metric("pass@1", [[T, F, T, T], [T, F, T]])
    with pytest.raises(ValueError, match="problem 2 has 1 answers"):
        compute_metric("maj@1", CORRECT, [["1"] * 4, ["1"] * 4, ["1"]])
    with pytest.raises(ValueError, match="no problems"):
        compute_metric("pass@1", [])
    with pytest.raises(ValueError, match="confidence"):
        compute_metric("pass@1", CORRECT, confidence=1.0)
    with pytest.raises(ValueError, match="bootstrap"):
        compute_metric("pass@1", CORRECT, bootstrap=-1)


def test_problem_scores_are_per_problem() -> None:
    assert problem_scores("pass@2", CORRECT).tolist() == pytest.approx([1.0, 0.0, 0.5])
    assert problem_scores("maj@4", CORRECT, [["a", "b", "a", "a"], ["x"] * 4, ["", "", "z", ""]]).tolist() == [
        1.0,
        0.0,
        1.0,
    ]
