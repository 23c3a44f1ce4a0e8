"""Intervals that know run-to-run variance: a two-level bootstrap over seeds, then problems, and the verdict rule.

A benchmark score bootstrapped over its problems alone leaves out the larger spread of RL fine-tuning: the run itself
(seed, data order, sampling). With several seeds of a cell, ``two_level_bootstrap`` resamples the seeds, then each
drawn seed's problems, so the interval holds both. With one seed, ``one_seed_interval`` widens the problem interval
by a seed variance borrowed from other cells (labelled as borrowed), or says that it has none; ``verdict`` never
reports "differs" from problem variance alone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

MATCHES, DIFFERS, UNDECIDED = "matches", "differs", "undecided"
# What an interval's spread holds (``Interval.source``)
SEEDS_AND_PROBLEMS, BORROWED, PROBLEMS_ONLY = "seeds+problems", "problems+borrowed seed variance", "problems only"


@dataclass(frozen=True)
class Interval:
    """An estimate with its interval, how many seeds it rests on and what its spread holds (``source``:
    ``seeds+problems``, ``problems+borrowed seed variance`` or ``problems only``)."""

    estimate: float
    low: float
    high: float
    seeds: int
    source: str

    def holds(self, value: float) -> bool:
        return self.low <= value <= self.high


def two_level_replicates(
    scores_by_seed: Sequence[Sequence[float]] | Sequence[np.ndarray], samples: int, rng_seed: int = 0
) -> np.ndarray:
    """``samples`` bootstrap replicates of the mean over seeds of each seed's mean score: each draws the seeds with
    replacement, then inside each drawn seed its problems with replacement.

    ``scores_by_seed``: one sequence of per-problem scores (0/1, or a fraction) per seed, at least two seeds.
    """
    seeds = [np.asarray(s, dtype=float) for s in scores_by_seed]
    k = len(seeds)
    if k < 2 or any(s.size == 0 for s in seeds):
        raise ValueError("two_level_bootstrap: needs two or more seeds, each with at least one problem")
    rng = np.random.default_rng(rng_seed)
    # resampled[i, j, b]: seed i's problems resampled, for draw j of replicate b: independent for every (j, b), so a
    # seed drawn twice in one replicate gets two independent problem resamples, as drawing them in turn would
    resampled = np.empty((k, k, samples))
    for i, scores in enumerate(seeds):
        for j in range(k):
            resampled[i, j] = scores[rng.integers(0, scores.size, (samples, scores.size))].mean(axis=1)
    drawn = rng.integers(0, k, (samples, k))  # the seeds each replicate draws, with replacement
    return resampled[drawn, np.arange(k), np.arange(samples)[:, None]].mean(axis=1)


def two_level_bootstrap(
    scores_by_seed: Sequence[Sequence[float]] | Sequence[np.ndarray],
    samples: int = 2000,
    confidence: float = 0.95,
    rng_seed: int = 0,
) -> Interval:
    """The mean over seeds of each seed's mean score, with the percentile interval of ``two_level_replicates``."""
    replicates = two_level_replicates(scores_by_seed, samples, rng_seed)
    tail = (1 - confidence) / 2
    estimate = float(np.mean([np.mean(s) for s in scores_by_seed]))
    low, high = np.quantile(replicates, [tail, 1 - tail])
    return Interval(estimate, float(low), float(high), len(scores_by_seed), SEEDS_AND_PROBLEMS)


def seed_variance(seed_means: Sequence[float]) -> float:
    """The between-seed variance of one cell's seed means (unbiased; needs two or more)."""
    if len(seed_means) < 2:
        raise ValueError("seed_variance: needs two or more seeds")
    return float(np.var(np.asarray(seed_means, dtype=float), ddof=1))


def pooled_seed_variance(cells: Sequence[Sequence[float]]) -> float | None:
    """The between-seed variance pooled over cells (each a list of seed means; cells with one seed add nothing),
    weighted by their degrees of freedom; None when no cell has two seeds."""
    usable = [c for c in cells if len(c) >= 2]
    if not usable:
        return None
    dof = sum(len(c) - 1 for c in usable)
    return sum(seed_variance(c) * (len(c) - 1) for c in usable) / dof


def one_seed_interval(
    estimate: float, problem_low: float, problem_high: float, borrowed_variance: float | None, confidence: float = 0.95
) -> Interval:
    """A one-seed cell's interval: the problem interval widened by a seed variance borrowed from other cells of the
    same method and scale (each side's distance from the estimate and z borrowed sds added in quadrature, so an
    uneven problem interval only widens), or the problem interval alone, labelled so."""
    if borrowed_variance is None:
        return Interval(estimate, problem_low, problem_high, 1, PROBLEMS_ONLY)
    seed_half = NormalDist().inv_cdf(1 - (1 - confidence) / 2) * math.sqrt(borrowed_variance)
    low = estimate - math.hypot(estimate - problem_low, seed_half)
    high = estimate + math.hypot(problem_high - estimate, seed_half)
    return Interval(estimate, low, high, 1, BORROWED)


def verdict(paper: float, interval: Interval) -> str:
    """``matches`` when the paper's value lies in the interval, ``differs`` when it lies outside an interval that
    holds seed variance (measured or borrowed), ``undecided`` when only problem variance is known."""
    if interval.holds(paper):
        return MATCHES
    return UNDECIDED if interval.source == PROBLEMS_ONLY else DIFFERS


def seeds_to_decide(difference: float, per_seed_sd: float, confidence: float = 0.95) -> int | None:
    """How many seeds per side an effect of ``difference`` needs before its interval excludes 0, at the measured
    between-seed standard deviation (a normal approximation: n = 2 (z sd / d)^2); None when there is no effect."""
    if difference == 0:
        return None
    z = NormalDist().inv_cdf(1 - (1 - confidence) / 2)
    return max(2, math.ceil(2 * (z * per_seed_sd / abs(difference)) ** 2))
