"""The two-level bootstrap against a hand computation, the one-seed rule and the seeds a claim would need."""

from __future__ import annotations

import numpy as np
import pytest

from corewarding.results.seed_variance import (
    DIFFERS,
    MATCHES,
    UNDECIDED,
    Interval,
    one_seed_interval,
    pooled_seed_variance,
    seeds_to_decide,
    two_level_bootstrap,
    two_level_replicates,
    verdict,
)


def test_the_two_level_bootstrap_matches_a_hand_computation() -> None:
    """Seed A scored [0, 1], seed B [1, 1]. A replicate draws two seeds (A or B, 1/2 each), then each drawn seed's
    two problems: A's mean is 0, 1/2 or 1 (1/4, 1/2, 1/4), B's is 1. One drawn seed's mean X is then 0 w.p. 1/8,
    1/2 w.p. 1/4 and 1 w.p. 5/8: E[X] = 3/4, Var[X] = 11/16 - 9/16 = 1/8; a replicate is (X1 + X2) / 2, so its
    mean is 3/4 and its variance 1/16."""
    scores = [[0, 1], [1, 1]]
    interval = two_level_bootstrap(scores, samples=40_000, rng_seed=7)
    assert interval.estimate == 0.75 and interval.seeds == 2 and interval.source == "seeds+problems"
    reps = two_level_replicates(scores, samples=40_000, rng_seed=7)
    assert reps.mean() == pytest.approx(0.75, abs=0.01) and reps.var() == pytest.approx(1 / 16, abs=0.003)
    assert set(np.unique(reps)) <= {0.0, 0.25, 0.5, 0.75, 1.0}  # the only values (X1 + X2) / 2 can take
    # P(replicate = 0) = (1/8)^2 = 1/64 and P(replicate = 1/4) = 2 x 1/8 x 1/4 = 1/16: the 2.5% quantile is 1/4;
    # P(replicate = 1) = (5/8)^2 = 39%: the 97.5% quantile is 1
    assert (interval.low, interval.high) == (0.25, 1.0)
    with pytest.raises(ValueError, match="two or more seeds"):
        two_level_bootstrap([[1, 0, 1]])


def test_one_seed_never_differs_on_problem_variance_alone() -> None:
    alone = one_seed_interval(0.40, 0.35, 0.45, borrowed_variance=None)
    assert alone.source == "problems only" and verdict(0.60, alone) == UNDECIDED and verdict(0.41, alone) == MATCHES
    borrowed = one_seed_interval(0.40, 0.35, 0.45, borrowed_variance=0.03**2)
    half = np.hypot(0.05, 1.959964 * 0.03)  # the problem half-width and 1.96 borrowed sds, in quadrature
    assert borrowed.low == pytest.approx(0.40 - half) and borrowed.high == pytest.approx(0.40 + half)
    assert borrowed.source == "problems+borrowed seed variance" and verdict(0.60, borrowed) == DIFFERS
    assert verdict(0.60, Interval(0.4, 0.3, 0.5, 3, "seeds+problems")) == DIFFERS


def test_pooled_variance_and_seeds_to_decide() -> None:
    # variances 0.0002 (1 dof) and 0.0004 (2 dof): pooled (0.0002 + 2 x 0.0004) / 3
    assert pooled_seed_variance([[0.50, 0.52], [0.40, 0.42, 0.44], [0.9]]) == pytest.approx(0.001 / 3)
    assert pooled_seed_variance([[0.5], [0.6]]) is None
    assert seeds_to_decide(0.02, 0.02) == 8  # 2 x (1.96 x 0.02 / 0.02)^2 = 7.7 -> 8
    assert seeds_to_decide(0.0, 0.02) is None and seeds_to_decide(0.5, 0.01) == 2
