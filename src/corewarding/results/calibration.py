"""The claims rule on simulated stores whose truth is known: how often it decides wrongly, how often it detects.

A simulated claim compares two methods, ``better`` and ``worse``, on one or two rows (model x data set). Each seed of
each cell is one training run: its problems (``problems`` of them, one sample each) are right with probability
``base + effect`` (``better``) or ``base`` (``worse``), plus the seed's own offset, drawn with variance ``ratio``
times the problem variance of one seed's score (``base (1 - base) / problems``). So with ``effect = 0`` the methods
are identical, and any ``holds`` or ``does not hold`` is a false verdict.

Layouts (``Setting.layout``): ``own``, one row whose cells have ``seeds`` seeds each; ``borrowed``, a second row of
the same model family and size where each cell has one seed and borrows the first row's seed variance;
``mismatched``, a second row of another family whose one seed may not borrow (the rule stays undecided), its
seed variance six times the lender's. ``designed_effect`` is the effect the rule's own power formula says ``seeds``
seeds find with probability 80%; ``calibrate`` runs a setting ``stores`` times and counts verdicts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from corewarding.results.claim_rule import FAILS, HOLDS, decide
from corewarding.results.seed_variance import POWER, planned_df, power

LAYOUTS = ("own", "borrowed", "mismatched")
GROUPS = {"row0": "qwen3-4b", "borrowed": "qwen3-4b", "mismatched": "llama-3.2-3b"}


@dataclass(frozen=True)
class Setting:
    """One simulated design: seeds per cell, seed-to-problem variance ratio, true effect, layout."""

    seeds: int
    ratio: float
    effect: float = 0.0
    layout: str = "own"
    problems: int = 500  # MATH500's
    base: float = 0.5

    @property
    def problem_variance(self) -> float:
        """The problem variance of one seed's score."""
        return self.base * (1 - self.base) / self.problems

    @property
    def per_seed(self) -> float:
        """The true variance of one seed's score: its seed offset and its problems."""
        return (1 + self.ratio) * self.problem_variance


@dataclass(frozen=True)
class Rates:
    """What ``calibrate`` counted over ``stores`` simulated claims."""

    setting: Setting
    stores: int
    decided: int  # holds or does not hold
    right: int  # holds with a positive effect (never, at effect 0)

    @property
    def decided_rate(self) -> float:
        return self.decided / self.stores

    @property
    def error(self) -> float:
        """The Monte-Carlo standard error of the decided rate."""
        p = self.decided_rate
        return math.sqrt(max(p * (1 - p), 1e-12) / self.stores)


def _cells(setting: Setting) -> dict[str, tuple[int, str, float]]:
    """cell -> (seeds, lending group, seed-variance multiplier) of a layout; two rows' cells are weighted alike."""
    cells = {"better@row0": (setting.seeds, GROUPS["row0"], 1.0), "worse@row0": (setting.seeds, GROUPS["row0"], 1.0)}
    if setting.layout == "borrowed":
        cells |= {"better@row1": (1, GROUPS["borrowed"], 1.0), "worse@row1": (1, GROUPS["borrowed"], 1.0)}
    elif setting.layout == "mismatched":
        cells |= {"better@row1": (1, GROUPS["mismatched"], 6.0), "worse@row1": (1, GROUPS["mismatched"], 6.0)}
    elif setting.layout != "own":
        raise ValueError(f"layout={setting.layout!r}: one of {', '.join(LAYOUTS)}")
    return cells


def weights(setting: Setting) -> dict[str, float]:
    """The effect's weights: the mean over rows of better minus worse."""
    cells = _cells(setting)
    rows = len(cells) // 2
    return {cell: (1 if cell.startswith("better") else -1) / rows for cell in cells}


def simulate(setting: Setting, rng: np.random.Generator) -> dict[str, list[np.ndarray]]:
    """One simulated store: each cell's per-problem scores, one array per seed."""
    seed_sd = math.sqrt(setting.ratio * setting.problem_variance)
    out: dict[str, list[np.ndarray]] = {}
    for cell, (seeds, _, multiplier) in _cells(setting).items():
        rate = setting.base + (setting.effect if cell.startswith("better") else 0.0)
        offsets = rng.normal(0.0, seed_sd * math.sqrt(multiplier), seeds)
        p = np.clip(rate + offsets, 0.0, 1.0)[:, None]
        out[cell] = list((rng.random((seeds, setting.problems)) < p).astype(float))
    return out


def designed_effect(setting: Setting, wanted: float = POWER) -> float:
    """The effect that ``setting.seeds`` seeds per cell find with probability ``wanted`` by the rule's own power
    formula (the true per-seed variance; the own layout's two cells)."""
    c = sum(w * w for w in weights(Setting(setting.seeds, setting.ratio)).values())
    variance, df = c * setting.per_seed / setting.seeds, planned_df(setting.seeds, 2)
    low, high = 0.0, 1.0
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if power(middle, variance, df) < wanted else (low, middle)
    return high


def calibrate(setting: Setting, stores: int, rng_seed: int = 0) -> Rates:
    """Run the compare rule on ``stores`` simulated stores of ``setting``; count its decisive verdicts."""
    rng = np.random.default_rng(rng_seed)
    weighted = weights(setting)
    groups = {cell: (cell.split("@")[0], group) for cell, (_, group, _) in _cells(setting).items()}  # method, group
    decided = right = 0
    for _ in range(stores):
        found = decide(simulate(setting, rng), weighted, groups, plan=False)
        decided += found.verdict in (HOLDS, FAILS)
        right += found.verdict == HOLDS
    return Rates(setting, stores, decided, right)
