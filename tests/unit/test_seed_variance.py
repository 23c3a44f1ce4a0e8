"""The seed-aware rule against hand computations: per-seed variance, lending, Welch-Satterthwaite, the t interval,
the one-seed rule, the lending groups and the seeds for 80% power."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from corewarding.results.seed_variance import (
    BORROWED,
    DIFFERS,
    MATCHES,
    PROBLEMS_ONLY,
    SEEDS_AND_PROBLEMS,
    UNDECIDED,
    Interval,
    Lent,
    cell_spread,
    lend,
    lending_group,
    one_seed_interval,
    per_seed_variance,
    power,
    problem_variance,
    seeds_for_power,
    spread_interval,
    variance_from_interval,
    verdict,
    welch,
)


def test_a_cells_spread_is_its_seeds_sample_variance_over_k_at_k_minus_1_df() -> None:
    # seed means 0.50, 0.56, 0.59: mean 0.55, sample variance ((0.05)^2 + (0.01)^2 + (0.04)^2) / 2 = 0.0021
    spread = cell_spread([0.50, 0.56, 0.59], [0.0001, 0.0002, 0.0003], None)
    assert spread.mean == pytest.approx(0.55) and spread.variance == pytest.approx(0.0021 / 3)
    assert (spread.df, spread.seeds, spread.source) == (2, 3, SEEDS_AND_PROBLEMS)
    interval = spread_interval(spread)
    half = 4.302653 * math.sqrt(0.0021 / 3)  # t(0.975, 2)
    assert interval.low == pytest.approx(0.55 - half, abs=1e-6) and interval.high == pytest.approx(0.55 + half)
    # seeds closer together than their problems allow: the problem variance is the floor
    assert per_seed_variance([0.50, 0.501], [0.004, 0.002]) == pytest.approx(0.003)


def test_lending_pools_the_per_seed_variance_with_the_lenders_df() -> None:
    # per-seed variances 0.0002 (1 df) and 0.0004 (2 df): pooled (0.0002 + 2 x 0.0004) / 3; the one-seed cell lends none
    lent = lend({"a": ([0.50, 0.52], []), "b": ([0.40, 0.42, 0.44], []), "c": ([0.9], [0.001])})
    assert lent is not None and lent.variance == pytest.approx(0.001 / 3) and lent.df == 3
    assert lent.lenders == (("a", 1), ("b", 2)) and lent.names == "a (df 1), b (df 2)"
    assert lend({"a": ([0.5], []), "b": ([0.6], [])}) is None
    one = cell_spread([0.7], [0.0001], lent)
    assert (one.variance, one.df, one.source, one.lenders) == (pytest.approx(0.001 / 3), 3, BORROWED, lent.names)
    assert cell_spread([0.7], [0.0009], lent).variance == 0.0009  # never below its own problem variance
    alone = cell_spread([0.7], [0.0001], None)
    assert (alone.variance, alone.df, alone.source) == (0.0001, math.inf, PROBLEMS_ONLY)


def test_welch_satterthwaite_by_hand() -> None:
    a = cell_spread([0.50, 0.56, 0.59], [], None)  # variance 0.0007, df 2
    b = cell_spread([0.40, 0.46], [], None)  # sample variance 0.0018, / 2 = 0.0009, df 1
    effect, variance, df = welch([a, b], [1.0, -1.0])
    assert effect == pytest.approx(0.12) and variance == pytest.approx(0.0016)
    assert df == pytest.approx(0.0016**2 / (0.0007**2 / 2 + 0.0009**2 / 1))  # 2.27


def test_one_seed_never_differs_on_problem_variance_alone() -> None:
    alone = one_seed_interval(0.40, 0.35, 0.45, None)
    assert alone.source == PROBLEMS_ONLY and verdict(0.60, alone) == UNDECIDED and verdict(0.41, alone) == MATCHES
    lent = Lent(0.03**2, 4, (("x", 2), ("y", 2)))
    borrowed = one_seed_interval(0.40, 0.37, 0.45, lent)
    half = stats.t.ppf(0.975, 4) * 0.03  # 2.776 x 0.03 = 0.0833, wider than the problem interval on both sides
    assert borrowed.low == pytest.approx(0.40 - half) and borrowed.high == pytest.approx(0.40 + half)
    assert borrowed.source == BORROWED and borrowed.df == 4 and verdict(0.60, borrowed) == DIFFERS
    assert borrowed.label == "problems+borrowed seed variance (from x (df 2), y (df 2))"
    narrow = one_seed_interval(0.40, 0.30, 0.45, Lent(0.01**2, 4, ()))
    assert (narrow.low, narrow.high) == (0.30, 0.45)  # never narrower than its own problem interval
    assert verdict(0.60, Interval(0.4, 0.3, 0.5, 3, SEEDS_AND_PROBLEMS)) == DIFFERS


def test_problem_variance_and_the_variance_behind_an_interval() -> None:
    assert problem_variance([0, 1, 1, 1]) == pytest.approx(0.25 / 4)  # sample variance 1/4, four problems
    assert variance_from_interval(0.5, 0.7) == pytest.approx((0.1 / 1.959964) ** 2)


def test_lending_groups_are_family_and_size() -> None:
    assert lending_group("qwen3-4b-base") == lending_group("qwen3-4b-instruct") == "qwen3-4b"
    assert lending_group("qwen3-4b-base") != lending_group("llama-3.2-3b-instruct")  # the mismatched lender
    assert lending_group("qwen3-8b-base") != lending_group("qwen2.5-7b") != lending_group("qwen3-1.7b-base")


def test_seeds_for_power_reaches_80_percent_and_no_fewer_do() -> None:
    # one cell against another (weights +1, -1: c = 2), per-seed variance 0.0004 (sd 2 points), effect 3 points
    n = seeds_for_power(0.03, 0.0004, 2.0, 2)
    assert n is not None
    assert power(0.03, 2 * 0.0004 / n, 2 * n - 3) >= 0.8 > power(0.03, 2 * 0.0004 / (n - 1), 2 * n - 5)
    # the normal approximation 2 (1.96 + 0.84)^2 (0.02 / 0.03)^2 = 7.0, and t at few df asks a little more
    assert n in (8, 9)
    assert seeds_for_power(0.0, 0.0004, 2.0, 2) is None and seeds_for_power(0.5, 0.0001, 2.0, 2) == 2
    # a power of 50% needs about half as many (the old formula's level)
    assert seeds_for_power(0.03, 0.0004, 2.0, 2, wanted=0.5) in (4, 5)


def test_power_matches_a_simulated_t_test() -> None:
    """The noncentral t power of a two-sample test with 5 seeds a side, against 20,000 simulated tests."""
    rng = np.random.default_rng(11)
    sd, effect, n = 0.02, 0.03, 5
    a = rng.normal(effect, sd, (20_000, n))
    b = rng.normal(0.0, sd, (20_000, n))
    t = (a.mean(1) - b.mean(1)) / np.sqrt(a.var(1, ddof=1) / n + b.var(1, ddof=1) / n)
    found = float(np.mean(np.abs(t) > stats.t.ppf(0.975, 2 * (n - 1))))
    assert found == pytest.approx(power(effect, 2 * sd**2 / n, 2 * (n - 1)), abs=0.015)


def test_a_lender_and_its_borrower_are_one_variance_estimate_in_welch() -> None:
    """Cell a (3 seeds, variance of its mean 0.0007, per seed 0.0021) lends to b (one seed, variance 0.0021): the two
    parts 0.0007 + 0.0021 come from one estimate with 2 df, so the effect a + b has exactly 2 df, not the 3.6 that
    two independent estimates would give."""
    a = cell_spread([0.50, 0.56, 0.59], [], None, "a")
    lent = lend({"a": ([0.50, 0.56, 0.59], [])})
    b = cell_spread([0.61], [], lent, "b")
    assert b.estimated_from == ("a",) and b.variance == pytest.approx(0.0021)
    _, variance, df = welch([a, b], [1.0, 1.0])
    assert variance == pytest.approx(0.0028) and df == pytest.approx(2.0)
    independent = cell_spread([0.61], [], Lent(0.0021, 2, (("z", 2),)), "b")
    assert welch([a, independent], [1.0, 1.0])[2] == pytest.approx(0.0028**2 / (0.0007**2 / 2 + 0.0021**2 / 2))
