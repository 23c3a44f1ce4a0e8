"""The compare rule of a claim (``claims``), pure: from the cells' per-problem scores to a verdict, the effect and its
t interval at the Welch-Satterthwaite degrees of freedom, with the seeds per cell for 80% power. The calibration
simulates it (``calibration``)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from corewarding.results.seed_variance import (
    BORROWED,
    POWER,
    PROBLEMS_ONLY,
    SEEDS_AND_PROBLEMS,
    Lent,
    cell_spread,
    lend,
    problem_variance,
    seeds_for_power,
    t_half_width,
    welch,
)

HOLDS, FAILS, UNDECIDED = "holds", "does not hold", "undecided"


@dataclass(frozen=True)
class Decision:
    """What a compare rule decides from the cells' seeds: the effect, its t interval (Welch-Satterthwaite degrees of
    freedom), what the weakest cell's spread holds, the lenders, and the seeds per cell for 80% power."""

    verdict: str
    effect: float
    low: float
    high: float
    df: float
    variance: str
    lenders: tuple[tuple[str, int], ...]
    seeds_needed: int | None
    per_seed_variance: float | None


def decide(
    cells: dict[str, list[np.ndarray]],
    weights: dict[str, float],
    groups: dict[str, tuple[str, str]],
    confidence: float = 0.95,
    plan: bool = True,
) -> Decision:
    """The compare rule on the cells' per-problem scores (cell -> one array per seed): each cell's mean over seeds
    and its variance (``seed_variance.cell_spread``; a one-seed cell borrows from the cells of its lending group,
    ``groups``: cell -> (method, model family and size)), then the weighted effect with its t interval. ``holds``
    when the interval is above 0, ``does not hold`` below, else ``undecided``; always ``undecided`` when a cell has
    one seed and nothing to borrow; ``plan``: with the seeds per cell for 80% power. Pure: the calibration
    simulates it (results/calibration.py)."""
    seeds = {cell: ([float(s.mean()) for s in arrays], [problem_variance(s) for s in arrays])
             for cell, arrays in cells.items()}  # fmt: skip
    by_group: dict[tuple[str, str], dict[str, tuple[list[float], list[float]]]] = {}
    for cell, values in seeds.items():
        by_group.setdefault(groups[cell], {})[cell] = values
    lent = {group: lend(members) for group, members in by_group.items()}
    spreads = {cell: cell_spread(*seeds[cell], lent[groups[cell]], cell) for cell in weights}
    order = list(weights)
    effect, variance, df = welch([spreads[c] for c in order], [weights[c] for c in order])
    half = t_half_width(variance, df, confidence)
    low, high = effect - half, effect + half
    sources = {s.source for s in spreads.values()}
    weakest = next(s for s in (PROBLEMS_ONLY, BORROWED, SEEDS_AND_PROBLEMS) if s in sources)
    decisive = weakest != PROBLEMS_ONLY
    verdict = HOLDS if decisive and low > 0 else FAILS if decisive and high < 0 else UNDECIDED
    borrowers = {groups[cell] for cell, spread in spreads.items() if spread.source == BORROWED}
    lenders = tuple(sorted({pair for group in borrowers for pair in (lent[group] or Lent(0, 0, ())).lenders}))
    known = [g.variance for g in lent.values() if g is not None]
    per_seed = float(np.mean(known)) if known else None
    needed = None
    if plan and per_seed is not None:
        needed = seeds_for_power(effect, per_seed, sum(w * w for w in weights.values()), len(weights), POWER,
                                 confidence)  # fmt: skip
    return Decision(verdict, effect, low, high, df, weakest, lenders, needed, per_seed)
