"""Benchmark metrics over n samples per problem, each with a bootstrap confidence interval.

Every metric is the mean over problems of a per-problem score (``correct[p]`` is the list of the n verdicts of
problem p, ``answers[p]`` its n extracted answers; n is the same for all problems):

* ``pass@1``: c/n, the fraction of correct samples;
* ``avg@k``: the fraction of correct samples among the first k (k <= n);
* ``pass@k``: the unbiased estimator 1 - C(n-c, k)/C(n, k) of Chen et al. (2021) (k <= n);
* ``maj@k``: the majority answer among the non-empty extracted answers of the first k samples (raw strings, as the
  reference votes; a tie goes to the answer seen first) is correct, judged by the verdict of the first sample that
  carries it; a problem without any non-empty answer counts wrong.

The confidence interval is a percentile bootstrap that resamples problems with replacement; an external tool's metric
has the normal interval of the standard error the tool reports (:func:`normal_interval`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "MetricValue",
    "bootstrap_interval",
    "compute_metric",
    "maj_correct",
    "normal_interval",
    "pass_at_k",
    "problem_scores",
]

_METRIC = re.compile(r"^(pass|avg|maj)@([1-9][0-9]*)$")
_CHUNK_ELEMENTS = 2_000_000  # resampled indices held at once
_Z95 = 1.96  # the normal quantile of a 95% interval


@dataclass(frozen=True)
class MetricValue:
    """A metric's value (mean over problems) and its bootstrap interval (None without bootstrap)."""

    value: float
    ci_low: float | None
    ci_high: float | None


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one problem with ``c`` correct among ``n`` samples: 1 - C(n-c, k) / C(n, k).

    Computed as a product (no huge binomials).

    >>> pass_at_k(2, 1, 1), pass_at_k(4, 1, 2), pass_at_k(4, 3, 2), pass_at_k(8, 0, 8)
    (0.5, 0.5, 1.0, 0.0)
    """
    if not 0 <= c <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n (got n={n}, c={c})")
    if not 1 <= k <= n:
        raise ValueError(f"pass@{k} needs 1 <= k <= n (n={n} samples per problem)")
    if n - c < k:
        return 1.0
    miss = 1.0
    for i in range(n - c + 1, n + 1):
        miss *= 1.0 - k / i
    return 1.0 - miss


def maj_correct(correct: Sequence[bool], answers: Sequence[str], k: int) -> bool:
    """Whether the majority answer of the first ``k`` samples is correct (see the module docstring).

    >>> maj_correct([False, True, True, False], ["1", "2", "2", "1"], 4)  # tie: "1" is seen first
    False
    >>> maj_correct([False, True, False], ["", "2", " "], 3), maj_correct([True], [""], 1)
    (True, False)
    """
    votes: dict[str, int] = {}
    first: dict[str, int] = {}
    for i, answer in enumerate(answers[:k]):
        if answer is None or not answer.strip():
            continue
        votes[answer] = votes.get(answer, 0) + 1
        first.setdefault(answer, i)
    if not votes:
        return False
    winner = max(votes, key=lambda answer: votes[answer])  # max keeps the first of equal counts: insertion order
    return bool(correct[first[winner]])


def _parse(name: str, n: int) -> tuple[str, int]:
    """Split a metric name into its kind and k, checking k against n."""
    match = _METRIC.match(name)
    if match is None:
        raise ValueError(f"unknown metric {name!r}: expected pass@k, avg@k or maj@k with k >= 1")
    kind, k = match.group(1), int(match.group(2))
    if k > n:
        raise ValueError(f"metric {name!r} needs k <= n, but there are only n={n} samples per problem")
    return kind, k


def _check_shapes(correct: Sequence[Sequence[bool]], answers: Sequence[Sequence[str]] | None) -> int:
    """Return n, the samples per problem, after checking that every problem has n verdicts (and n answers)."""
    if not correct:
        raise ValueError("no problems to score")
    n = len(correct[0])
    if n == 0:
        raise ValueError("problem 0 has no samples")
    for p, row in enumerate(correct):
        if len(row) != n:
            raise ValueError(f"problem {p} has {len(row)} samples, problem 0 has {n}: n must be the same for all")
    if answers is not None:
        if len(answers) != len(correct):
            raise ValueError(f"{len(answers)} answer lists for {len(correct)} problems")
        for p, answer_row in enumerate(answers):
            if len(answer_row) != n:
                raise ValueError(f"problem {p} has {len(answer_row)} answers but {n} verdicts")
    return n


def problem_scores(
    name: str, correct: Sequence[Sequence[bool]], answers: Sequence[Sequence[str]] | None = None
) -> np.ndarray:
    """The per-problem scores whose mean is metric ``name`` (``answers`` is needed for maj@k only).

    >>> problem_scores("avg@2", [[True, False, True], [False, True, True]]).tolist()
    [0.5, 0.5]
    >>> problem_scores("pass@1", [[True, False, True], [False, False, True]]).tolist() == [2 / 3, 1 / 3]
    True
    """
    n = _check_shapes(correct, answers)
    kind, k = _parse(name, n)
    matrix = np.asarray(correct, dtype=bool)
    if kind == "avg":
        return matrix[:, :k].mean(axis=1)
    if kind == "pass" and k == 1:
        return matrix.mean(axis=1)  # c/n (the unbiased pass@1)
    if kind == "pass":
        return np.array([pass_at_k(n, int(c), k) for c in matrix.sum(axis=1)])
    if answers is None:
        raise ValueError(f"metric {name!r} needs the extracted answers")
    return np.array([maj_correct(row, ans, k) for row, ans in zip(correct, answers, strict=True)], dtype=float)


def bootstrap_interval(scores: np.ndarray, resamples: int, confidence: float, seed: int) -> tuple[float, float]:
    """Percentile interval of the mean of ``scores`` over ``resamples`` resamplings of the problems."""
    rng = np.random.Generator(np.random.PCG64(seed))
    size = len(scores)
    rows = max(1, _CHUNK_ELEMENTS // size)
    means = np.empty(resamples)
    for start in range(0, resamples, rows):
        stop = min(resamples, start + rows)
        means[start:stop] = scores[rng.integers(0, size, size=(stop - start, size))].mean(axis=1)
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(means, [alpha, 1.0 - alpha])
    return float(low), float(high)


def compute_metric(
    name: str,
    correct: Sequence[Sequence[bool]],
    answers: Sequence[Sequence[str]] | None = None,
    bootstrap: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> MetricValue:
    """Metric ``name`` over the problems, with a ``confidence`` bootstrap interval (``bootstrap=0``: none).

    >>> compute_metric("pass@2", [[True, False], [False, False]], bootstrap=0)
    MetricValue(value=0.5, ci_low=None, ci_high=None)
    >>> compute_metric("maj@3", [[False, True, True]], [["1", "2", "2"]]).value
    1.0
    """
    if bootstrap < 0:
        raise ValueError(f"bootstrap must be >= 0 resamples (got {bootstrap})")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1) (got {confidence})")
    scores = problem_scores(name, correct, answers)
    value = float(scores.mean())
    if bootstrap == 0:
        return MetricValue(value, None, None)
    low, high = bootstrap_interval(scores, bootstrap, confidence, seed)
    return MetricValue(value, low, high)


def normal_interval(value: float, stderr: float | None) -> MetricValue:
    """``value`` with the 95% normal interval of its standard error (None: no interval).

    >>> normal_interval(0.5, 0.1)
    MetricValue(value=0.5, ci_low=0.304, ci_high=0.696)
    >>> normal_interval(0.5, None).ci_low is None
    True
    """
    if stderr is None:
        return MetricValue(value, None, None)
    return MetricValue(value, value - _Z95 * stderr, value + _Z95 * stderr)
