"""Intervals that know run-to-run variance, at a t level calibrated for few seeds, and the verdict rule.

A benchmark score's problem interval leaves out the larger spread of RL fine-tuning: the run itself (seed, data
order, sampling). A cell's score is the mean of its seeds' scores, and its variance is estimated from them:

- two or more seeds: the per-seed variance is the seeds' sample variance, and at least the mean problem variance of
  one seed's score (``per_seed_variance``: a seed's score varies with its problems too, and with few seeds their
  sample variance can come out below that), divided by the seeds, with ``k - 1`` degrees of freedom;
- one seed: a per-seed variance lent by cells of the same method, model family and size with two or more seeds
  (``Lent``: pooled, with the lenders' degrees of freedom and names), or the problem variance alone, on which no
  verdict is decisive.

Intervals and effects use Student's t at those degrees of freedom (an effect over several cells: Welch-Satterthwaite),
which holds its 5% at two or three seeds where the two-level percentile bootstrap did not (docs/results.md has the
calibration). ``seeds_for_power`` says how many seeds per cell detect an effect with 80% probability.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TypeVar

import numpy as np
from scipy import stats

MATCHES, DIFFERS, UNDECIDED = "matches", "differs", "undecided"
# What an interval's spread holds (``Interval.source``)
SEEDS_AND_PROBLEMS, BORROWED, PROBLEMS_ONLY = "seeds+problems", "problems+borrowed seed variance", "problems only"
POWER = 0.8  # the detection probability ``seeds_for_power`` plans for
_SIZE = re.compile(r"^(.*?\d+(?:\.\d+)?b)(?:-|$)")  # a base model's name up to its size: qwen3-4b(-base)


@dataclass(frozen=True)
class Interval:
    """An estimate with its interval, how many seeds it rests on, what its spread holds (``source``), the degrees of
    freedom of its variance (inf: known) and, for a borrowed one, who lent it."""

    estimate: float
    low: float
    high: float
    seeds: int
    source: str
    df: float = math.inf
    lenders: str = ""

    def holds(self, value: float) -> bool:
        return self.low <= value <= self.high

    @property
    def label(self) -> str:
        """``source``, with the lenders and their degrees of freedom when borrowed."""
        return f"{self.source} (from {self.lenders})" if self.lenders else self.source


@dataclass(frozen=True)
class Lent:
    """A per-seed variance pooled over the lending cells (two or more seeds each), its degrees of freedom (the sum of
    each lender's seeds - 1) and the lenders (cell, degrees of freedom)."""

    variance: float
    df: int
    lenders: tuple[tuple[str, int], ...]

    def scaled(self, factor: float) -> Lent:
        """The same in other units (``factor`` 100: fractions to percent)."""
        return Lent(self.variance * factor**2, self.df, self.lenders)

    @property
    def names(self) -> str:
        """``cell (df 2), cell (df 1)``: who lent it, as the page, the report and ``claims --json`` name them."""
        return ", ".join(f"{cell} (df {df})" for cell, df in self.lenders)


@dataclass(frozen=True)
class Spread:
    """One cell's mean score, the variance of that mean, its degrees of freedom and what it holds."""

    mean: float
    variance: float
    df: float
    seeds: int
    source: str
    lenders: str = ""
    estimated_from: tuple[str, ...] = ()  # the cells whose seeds gave the variance (shared by a lender and borrower)


def lending_group(base_model: str) -> str:
    """The models whose cells lend each other a seed variance: the same family and size, read from the name up to
    its size (``qwen3-4b-base`` and ``qwen3-4b-instruct``: ``qwen3-4b``; ``llama-3.2-3b-instruct``:
    ``llama-3.2-3b``); a name without a size is a group of its own.

    >>> lending_group("qwen3-4b-base"), lending_group("llama-3.2-3b-instruct"), lending_group("qwen2.5-7b")
    ('qwen3-4b', 'llama-3.2-3b', 'qwen2.5-7b')
    >>> lending_group("qwen3-1.7b-base"), lending_group("tiny")
    ('qwen3-1.7b', 'tiny')
    """
    found = _SIZE.match(base_model.lower())
    return found.group(1) if found else base_model


def problem_variance(scores: Sequence[float] | np.ndarray) -> float:
    """The variance of one evaluation's mean score over its problems (each problem's score: its mean verdict)."""
    values = np.asarray(scores, dtype=float)
    return float(np.var(values, ddof=1) / values.size) if values.size >= 2 else 0.0


Bounds = TypeVar("Bounds", float, np.ndarray)


def variance_from_interval(low: Bounds, high: Bounds, confidence: float = 0.95) -> Bounds:
    """The variance of a mean from its (normal) problem interval; of each, for arrays of bounds."""
    z = t_quantile(1 - (1 - confidence) / 2, math.inf)
    return ((high - low) / (2 * z)) ** 2


def per_seed_variance(seed_means: Sequence[float], problem_variances: Sequence[float] = ()) -> float:
    """The variance of one seed's score: the seeds' sample variance, and at least their mean problem variance."""
    floor = float(np.mean(problem_variances)) if len(problem_variances) else 0.0
    return max(float(np.var(np.asarray(seed_means, dtype=float), ddof=1)), floor)


def lend(cells: Mapping[str, tuple[Sequence[float], Sequence[float]]]) -> Lent | None:
    """The per-seed variance that ``cells`` (cell -> (seed means, problem variances)) lend, pooled over those with two
    or more seeds and weighted by their degrees of freedom; None when none has two seeds."""
    usable = {cell: values for cell, values in cells.items() if len(values[0]) >= 2}
    if not usable:
        return None
    df = sum(len(means) - 1 for means, _ in usable.values())
    pooled = sum(per_seed_variance(means, problems) * (len(means) - 1) for means, problems in usable.values()) / df
    return Lent(pooled, df, tuple((cell, len(means) - 1) for cell, (means, _) in sorted(usable.items())))


def cell_spread(
    seed_means: Sequence[float], problem_variances: Sequence[float], lent: Lent | None, cell: str = ""
) -> Spread:
    """A cell's mean over its seeds and that mean's variance: from its own seeds (two or more), else from the lent
    per-seed variance (at least its own problem variance), else its problem variance alone."""
    k, mean = len(seed_means), float(np.mean(seed_means))
    if k >= 2:
        variance = per_seed_variance(seed_means, problem_variances) / k
        return Spread(mean, variance, k - 1, k, SEEDS_AND_PROBLEMS, estimated_from=(cell,))
    own = float(np.mean(problem_variances)) if len(problem_variances) else 0.0
    if lent is None:
        return Spread(mean, own, math.inf, 1, PROBLEMS_ONLY)
    lenders = tuple(name for name, _ in lent.lenders)
    return Spread(mean, max(lent.variance, own), lent.df, 1, BORROWED, lent.names, lenders)


def welch(spreads: Sequence[Spread], weights: Sequence[float]) -> tuple[float, float, float]:
    """The weighted sum of the cells' means, its variance, and its Welch-Satterthwaite degrees of freedom. Parts whose
    variance comes from the same seeds (a lender's and its borrower's) are one estimate, counted once."""
    estimate = sum(w * s.mean for s, w in zip(spreads, weights, strict=True))
    variance = sum(w * w * s.variance for s, w in zip(spreads, weights, strict=True))
    shared: dict[tuple[str, ...] | int, tuple[float, float]] = {}  # estimate -> (its parts' sum, its df)
    for i, (s, w) in enumerate(zip(spreads, weights, strict=True)):
        if math.isfinite(s.df) and s.df > 0:
            key = s.estimated_from if s.estimated_from and all(s.estimated_from) else i
            total, _ = shared.get(key, (0.0, s.df))
            shared[key] = (total + w * w * s.variance, s.df)
    finite = sum(part * part / df for part, df in shared.values())
    df = variance**2 / finite if finite > 0 else math.inf
    return float(estimate), float(variance), float(df)


@lru_cache(maxsize=4096)
def t_quantile(tail: float, df: float) -> float:
    """Student's t quantile (the normal one at infinite degrees of freedom); cached: a page asks for few distinct."""
    return float(stats.norm.ppf(tail) if not math.isfinite(df) else stats.t.ppf(tail, df))


def t_half_width(variance: float, df: float, confidence: float = 0.95) -> float:
    """Half the width of a t interval of a mean with this variance and degrees of freedom (normal when infinite)."""
    return t_quantile(1 - (1 - confidence) / 2, df) * math.sqrt(max(variance, 0.0))


def spread_interval(spread: Spread, confidence: float = 0.95) -> Interval:
    """A cell's t interval from its spread."""
    half = t_half_width(spread.variance, spread.df, confidence)
    return Interval(spread.mean, spread.mean - half, spread.mean + half, spread.seeds, spread.source, spread.df,
                    spread.lenders)  # fmt: skip


def one_seed_interval(
    estimate: float, problem_low: float, problem_high: float, lent: Lent | None, confidence: float = 0.95
) -> Interval:
    """A one-seed cell's interval: the t interval of the lent per-seed variance (at its degrees of freedom), never
    narrower than the cell's own problem interval; or the problem interval alone, labelled so."""
    if lent is None:
        return Interval(estimate, problem_low, problem_high, 1, PROBLEMS_ONLY)
    half = t_half_width(lent.variance, lent.df, confidence)
    return Interval(estimate, min(estimate - half, problem_low), max(estimate + half, problem_high), 1, BORROWED,
                    lent.df, lent.names)  # fmt: skip


def verdict(paper: float, interval: Interval) -> str:
    """``matches`` when the paper's value lies in the interval, ``differs`` when it lies outside an interval that
    holds seed variance (measured or borrowed), ``undecided`` when only problem variance is known."""
    if interval.holds(paper):
        return MATCHES
    return UNDECIDED if interval.source == PROBLEMS_ONLY else DIFFERS


def power(effect: float, variance: float, df: float, confidence: float = 0.95) -> float:
    """The probability that a two-sided t test at ``confidence`` finds an effect of this size, its estimate having
    this variance and degrees of freedom (the noncentral t)."""
    if variance <= 0:
        return 1.0 if effect else 0.0
    noncentrality = abs(effect) / math.sqrt(variance)
    tail = 1 - (1 - confidence) / 2
    critical = stats.t.ppf(tail, df)
    return float(stats.nct.sf(critical, df, noncentrality) + stats.nct.cdf(-critical, df, noncentrality))


def planned_df(seeds: int, cells: int) -> int:
    """The degrees of freedom a plan of ``seeds`` per cell expects: the pooled ``cells (seeds - 1)`` less one, since
    the Welch-Satterthwaite degrees of freedom fall below the pooled ones whenever the cells' sample variances differ
    (with it the simulated detection rate at the planned seeds is about 80%: docs/results.md)."""
    return max(1, cells * (seeds - 1) - 1)


def seeds_for_power(
    effect: float,
    per_seed: float,
    weight_squares: float,
    cells: int,
    wanted: float = POWER,
    confidence: float = 0.95,
    most: int = 100_000,
) -> int | None:
    """The seeds per cell (at least 2) at which an effect of ``effect`` is found with probability ``wanted``, its
    estimate's variance being ``weight_squares * per_seed / n`` at ``planned_df(n, cells)`` degrees of freedom
    (``per_seed``: one seed's variance, problems included); None without an effect, or beyond ``most``."""  # fmt: skip
    if effect == 0 or per_seed <= 0:
        return None
    low, high = 2, 2
    while power(effect, weight_squares * per_seed / high, planned_df(high, cells), confidence) < wanted:
        if high >= most:
            return None
        low, high = high, min(high * 2, most)
    while low < high:  # the smallest n in [low, high] that reaches it
        middle = (low + high) // 2
        if power(effect, weight_squares * per_seed / middle, planned_df(middle, cells), confidence) >= wanted:
            high = middle
        else:
            low = middle + 1
    return high
