"""Tests written against the mutants mutmut left alive in the claim and verdict statistics (`make mutants`,
docs/performance.md): seed_variance by hand, cell_verdicts' and claims' rules on frames (the store readers
replaced by fakes, so no DuckDB), with uneven seeds and rates."""

from __future__ import annotations

import math
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np
import pandas as pd
import pytest
from omegaconf import OmegaConf

from corewarding.matrix import Cell
from corewarding.results import cell_verdicts, claims
from corewarding.results.cell_verdicts import (
    APPROXIMATE,
    BASE_MODEL,
    NO_CI,
    NOT_MEASURED,
    OUTSIDE,
    UNDECIDED,
    WITHIN,
    base_interval,
    borrowed_for,
    cell_interval,
    in_percent,
    pooled_variances,
    scale_of,
    seeds_by_key,
    steps_text,
    verdict_of,
)
from corewarding.results.claims import FAILS, HOLDS, Claim, ClaimResult, evaluate_claims
from corewarding.results.collapse import CollapseRules
from corewarding.results.seed_variance import (
    BORROWED,
    DIFFERS,
    MATCHES,
    PROBLEMS_ONLY,
    SEEDS_AND_PROBLEMS,
    Interval,
    one_seed_interval,
    pooled_seed_variance,
    seed_variance,
    seeds_to_decide,
    two_level_bootstrap,
    two_level_replicates,
    verdict,
)

Z95, Z90 = NormalDist().inv_cdf(0.975), NormalDist().inv_cdf(0.95)


def rights(n: int, right: int) -> np.ndarray:
    """``n`` problems scored 1 for the first ``right``, 0 after."""
    return (np.arange(n) < right).astype(float)


# ---- seed_variance -------------------------------------------------------------------------------------------------
def test_two_level_replicates_checks_its_input_and_is_seeded() -> None:
    for bad in ([[1.0, 0.0]], [[1.0], []], []):
        with pytest.raises(ValueError, match=r"^two_level_bootstrap: needs two or more seeds, each with at least one"):
            two_level_replicates(bad, 10)
    seeds = [[0.0, 1.0, 1.0], [0.2, 0.9]]
    first = two_level_replicates(seeds, 50)
    assert first.shape == (50,) and np.array_equal(first, two_level_replicates(seeds, 50, rng_seed=0))
    assert not np.array_equal(first, two_level_replicates(seeds, 50, rng_seed=1))


def test_one_problem_per_seed_leaves_only_the_draw_of_seeds() -> None:
    """Seeds scoring 0, 3 and 9 on one problem each: a replicate is the mean of three seeds drawn with replacement,
    so its mean is 4 and its variance Var(X) / 3 = (90 / 3 - 16) / 3 = 14 / 3; every value is a multiple of 1."""
    reps = two_level_replicates([[0.0], [3.0], [9.0]], 30_000, rng_seed=11)
    assert reps.mean() == pytest.approx(4.0, abs=0.05) and reps.var() == pytest.approx(14 / 3, rel=0.03)
    assert set(np.unique(reps)) <= {v / 3 for v in range(0, 28)} and reps.min() == 0.0 and reps.max() == 9.0


def test_a_seed_drawn_twice_is_resampled_twice() -> None:
    """Seeds [0, 1, 1] and [0, 0, 0, 1]: a drawn seed's resampled mean X has E[Var(X | seed)] = (2/27 + 3/64) / 2 and
    Var(E[X | seed]) = (5/24)^2, so Var(X) = 0.10388 and two independent draws average to Var(X) / 2 = 0.05194. One
    resample reused for a seed drawn twice (half the replicates) would add E[Var(X | seed)] / 4 = 0.01512."""
    reps = two_level_replicates([[0.0, 1.0, 1.0], [0.0, 0.0, 0.0, 1.0]], 40_000, rng_seed=5)
    var_x = (2 / 27 + 3 / 64) / 2 + (5 / 24) ** 2
    assert reps.var() == pytest.approx(var_x / 2, abs=0.003) and reps.mean() == pytest.approx(11 / 24, abs=0.01)


def test_two_level_bootstrap_estimate_is_the_mean_of_seed_means_and_its_interval_the_replicates_quantiles() -> None:
    seeds = [[1.0, 0.0, 0.0, 0.0], [1.0, 1.0], [0.0, 1.0, 1.0]]  # seed means 1/4, 1, 2/3; pooled 6/9 differs
    interval = two_level_bootstrap(seeds, samples=600, confidence=0.8, rng_seed=3)
    reps = two_level_replicates(seeds, 600, rng_seed=3)
    assert interval.estimate == pytest.approx((0.25 + 1 + 2 / 3) / 3)
    assert (interval.low, interval.high) == tuple(np.quantile(reps, [0.1, 0.9]))
    assert (interval.seeds, interval.source) == (3, SEEDS_AND_PROBLEMS)
    scores = [rights(30, 7) * 0.9 + 0.01, rights(25, 19) * 0.8, rights(35, 12)]  # many distinct replicate values
    default = two_level_bootstrap(scores)
    assert default == two_level_bootstrap(scores, samples=2000, confidence=0.95, rng_seed=0)
    assert (default.low, default.high) == tuple(np.quantile(two_level_replicates(scores, 2000), [0.025, 0.975]))


def test_seed_variance_pooled_by_degrees_of_freedom() -> None:
    assert seed_variance([0.1, 0.4, 0.2]) == pytest.approx(0.07 / 3)  # squares 0.0178 + 0.0278 + 0.0011, over 2
    assert seed_variance([0.3, 0.6]) == pytest.approx(0.045)
    with pytest.raises(ValueError, match=r"^seed_variance: needs two or more seeds$"):
        seed_variance([0.3])
    # 0.045 on 1 degree of freedom, 0.07 / 3 on 2, the one-seed cell adds nothing: (0.045 + 0.14 / 3) / 3
    assert pooled_seed_variance([[0.3, 0.6], [0.9], [0.1, 0.4, 0.2]]) == pytest.approx((0.045 + 0.14 / 3) / 3)
    assert pooled_seed_variance([[0.3], []]) is None and pooled_seed_variance([]) is None


def test_one_seed_interval_widens_each_side_on_its_own() -> None:
    alone = one_seed_interval(0.40, 0.30, 0.45, None, confidence=0.9)
    assert alone == Interval(0.40, 0.30, 0.45, 1, PROBLEMS_ONLY)
    widened = one_seed_interval(0.40, 0.30, 0.45, 0.0004, confidence=0.9)  # borrowed sd 0.02, z = 1.645
    assert widened.low == pytest.approx(0.40 - math.hypot(0.10, Z90 * 0.02))
    assert widened.high == pytest.approx(0.40 + math.hypot(0.05, Z90 * 0.02))
    assert (widened.estimate, widened.seeds, widened.source) == (0.40, 1, BORROWED)
    default = one_seed_interval(0.40, 0.30, 0.45, 0.0004)
    assert default.high == pytest.approx(0.40 + math.hypot(0.05, Z95 * 0.02))


def test_verdict_edges() -> None:
    measured = Interval(0.4, 0.3, 0.6, 2, SEEDS_AND_PROBLEMS)
    assert [verdict(v, measured) for v in (0.3, 0.6, 0.2999, 0.6001)] == [MATCHES, MATCHES, DIFFERS, DIFFERS]
    problems = Interval(0.4, 0.3, 0.6, 1, PROBLEMS_ONLY)
    assert [verdict(v, problems) for v in (0.3, 0.7)] == [MATCHES, "undecided"]
    assert verdict(0.7, Interval(0.4, 0.3, 0.6, 1, BORROWED)) == DIFFERS


def test_seeds_to_decide_by_hand() -> None:
    assert seeds_to_decide(-0.02, 0.02) == 8  # 2 x 1.96^2 = 7.7, whichever the sign
    assert seeds_to_decide(0.03, 0.02, confidence=0.9) == 3  # 2 x (1.645 x 2 / 3)^2 = 2.4
    assert seeds_to_decide(0.01, 0.03) == 70  # 2 x (1.96 x 3)^2 = 69.1
    assert seeds_to_decide(0.3, 0.01) == 2 and seeds_to_decide(0.0, 0.05) is None


# ---- cell_verdicts -------------------------------------------------------------------------------------------------
def seed_rows(values: list[float], lows: list[float | None], highs: list[float | None], metric: str = "pass@1"):
    n = len(values)
    return pd.DataFrame({
        "run_id": [f"r{k}" for k in range(n)], "step": [40 + k for k in range(n)], "benchmark": ["MATH500"] * n,
        "metric": [metric] * n, "value": values, "ci_low": lows, "ci_high": highs,
    })  # fmt: skip


class FakeProblemScores:
    """cell_verdicts.problem_scores on a dict: run_id -> per-problem scores (absent: None); calls recorded."""

    def __init__(self, scores: dict[str, np.ndarray]) -> None:
        self.scores = scores
        self.calls: list[tuple[Any, ...]] = []

    def __call__(self, con: Any, run_id: str, step: int, benchmark: str, checker: str) -> np.ndarray | None:
        self.calls.append((con, run_id, step, benchmark, checker))
        return self.scores.get(run_id)


def test_the_normal_approximation_by_hand(monkeypatch: pytest.MonkeyPatch) -> None:
    """Seeds 0.60, 0.66, 0.69 (sd 0.0458) with problem half-widths 0.02, 0.04, 0.03: half-width
    hypot(0.03, z 0.0458 / sqrt 3), around their mean 0.65."""
    monkeypatch.setattr(cell_verdicts, "problem_scores", FakeProblemScores({}))
    rows = seed_rows([0.60, 0.66, 0.69], [0.58, 0.62, 0.66], [0.62, 0.70, 0.72], metric="maj@8")
    sd = float(np.std([0.60, 0.66, 0.69], ddof=1))
    for confidence, z in ((0.95, Z95), (0.9, Z90)):
        got = cell_interval("con", rows, "strict", None, confidence=confidence)  # type: ignore[arg-type]
        half = math.hypot(0.03, z * sd / math.sqrt(3))
        assert got is not None and got.estimate == pytest.approx(0.65)
        assert (got.low, got.high) == (pytest.approx(0.65 - half), pytest.approx(0.65 + half))
        assert (got.seeds, got.source) == (3, APPROXIMATE)
    rows.loc[1, "ci_high"] = None
    assert cell_interval("con", rows, "strict", None) is None  # a seed without its interval: none


def test_seeds_with_samples_take_the_bootstrap_centred_on_the_stored_values(monkeypatch: pytest.MonkeyPatch) -> None:
    scores = {"r0": rights(40, 22), "r1": rights(40, 27), "r2": rights(30, 20)}
    fake = FakeProblemScores(scores)
    monkeypatch.setattr(cell_verdicts, "problem_scores", fake)
    rows = seed_rows([0.56, 0.66, 0.69], [0.5, 0.6, 0.6], [0.6, 0.7, 0.7], metric="avg@16")
    got = cell_interval("con", rows, "math_verify", None, samples=300, confidence=0.9)  # type: ignore[arg-type]
    boot = two_level_bootstrap(list(scores.values()), 300, 0.9)
    shift = float(np.mean([0.56, 0.66, 0.69])) - boot.estimate
    assert got == Interval(pytest.approx(0.6366667), pytest.approx(boot.low + shift), pytest.approx(boot.high + shift),
                           3, SEEDS_AND_PROBLEMS)  # fmt: skip
    assert fake.calls == [("con", "r0", 40, "MATH500", "math_verify"), ("con", "r1", 41, "MATH500", "math_verify"),
                          ("con", "r2", 42, "MATH500", "math_verify")]  # fmt: skip
    pass1 = cell_interval("con", seed_rows([0.56, 0.66], [0.5, 0.6], [0.6, 0.7]), "strict", None)  # type: ignore[arg-type]
    assert pass1 is not None and pass1.source == SEEDS_AND_PROBLEMS
    assert pass1 == cell_interval("con", seed_rows([0.56, 0.66], [0.5, 0.6], [0.6, 0.7]), "strict", None, 2000, 0.95)  # type: ignore[arg-type]
    del scores["r1"]  # one seed without samples: the normal approximation for all
    partial = cell_interval("con", rows, "math_verify", None)  # type: ignore[arg-type]
    assert partial is not None and partial.source == APPROXIMATE


def test_one_seed_cells_and_base_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cell_verdicts, "problem_scores", FakeProblemScores({}))
    one = seed_rows([0.40], [0.30], [0.45])
    borrowed = cell_interval("con", one, "strict", 0.0004, confidence=0.9)  # type: ignore[arg-type]
    assert borrowed == one_seed_interval(0.40, 0.30, 0.45, 0.0004, 0.9)
    assert cell_interval("con", one, "strict", None) == Interval(0.40, 0.30, 0.45, 1, PROBLEMS_ONLY)  # type: ignore[arg-type]
    for low, high in ((None, 0.45), (0.30, None), (float("nan"), 0.45), (0.30, float("nan"))):
        assert cell_interval("con", seed_rows([0.4], [low], [high]), "strict", 0.01) is None  # type: ignore[arg-type]
        assert base_interval(0.4, low, high) is None
    assert base_interval(0.72, 0.69, 0.76) == Interval(0.72, 0.69, 0.76, 0, BASE_MODEL)


def test_verdict_words_and_percent() -> None:
    seeded = Interval(0.61, 0.59, 0.63, 3, SEEDS_AND_PROBLEMS)
    assert verdict_of(0.60, 0.61, seeded) == WITHIN and verdict_of(0.70, 0.61, seeded) == OUTSIDE
    assert verdict_of(0.70, 0.61, Interval(0.61, 0.59, 0.63, 1, PROBLEMS_ONLY)) == UNDECIDED
    assert verdict_of(0.70, None, seeded) == NOT_MEASURED and verdict_of(None, None, None) == NOT_MEASURED
    assert verdict_of(None, 0.61, seeded) == NO_CI and verdict_of(0.70, 0.61, None) == NO_CI
    assert in_percent(Interval(0.456789, 0.101234, 0.987656, 2, BORROWED)) == Interval(45.68, 10.12, 98.77, 2, BORROWED)
    assert in_percent(None) is None


def test_pooled_variances_pool_cells_of_a_method_at_a_scale(monkeypatch: pytest.MonkeyPatch) -> None:
    def row(method: str, model: str, cell: str, value: float, metric: str = "pass@1") -> dict[str, Any]:
        return {"method": method, "base_model": model, "benchmark_key": "math500", "metric": metric,
                "cell_group": cell, "value": value}  # fmt: skip

    seeds = pd.DataFrame([
        row("mv", "qwen3-8b-base", "a", 0.60), row("mv", "qwen3-8b-base", "a", 0.66),
        row("mv", "qwen3-8b-base", "a", 0.69),  # variance 0.0021 on 2 dof
        row("mv", "qwen2.5-7b", "b", 0.40), row("mv", "qwen2.5-7b", "b", 0.46),  # 0.0018 on 1 dof, same ~8B scale
        row("mv", "qwen3-1.7b-base", "c", 0.20),  # one seed: adds nothing
        row("mv", "qwen3-1.7b-base", "d", 0.30), row("mv", "qwen3-1.7b-base", "d", 0.34),  # ~2B: on its own
        row("mv", "qwen3-8b-base", "e", 0.51, metric="avg@16"),
    ])  # fmt: skip
    pooled = pooled_variances(seeds)
    assert pooled == {
        ("mv", "~8B", "math500", "pass@1"): pytest.approx((0.0042 + 0.0018) / 3),
        ("mv", "~2B", "math500", "pass@1"): pytest.approx(0.0008),
    }
    assert borrowed_for(pooled, ("mv", "qwen2.5-7b", "math", "math500", "pass@1")) == pytest.approx(0.002)
    assert borrowed_for(pooled, ("mv", "qwen3-8b-base", "math", "math500", "avg@16")) is None


def test_scale_of_a_models_size(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Sizes to the nearest power of two, a sub-billion model included; a size that is not a positive number (zero,
    negative, a string, absent) leaves the model a scale of its own. Configs here are stand-ins: names no real
    config has, read through a fake config folder."""
    sizes: dict[str, object] = {"m-half": 0.49, "m-one": 1.0, "m-three": 2.9, "m-zero": 0, "m-neg": -3.0}
    sizes |= {"m-text": "7", "m-none": None}
    (tmp_path / "base_model").mkdir()
    for name in [*sizes, "m-noshape"]:
        (tmp_path / "base_model" / f"{name}.yaml").write_text("{}\n")

    def option(group: str, name: str) -> Any:
        assert group == "base_model"
        shape = None if name == "m-noshape" else {"params_b": sizes[name]}
        return OmegaConf.create({"base_model": {"shape": shape}})

    monkeypatch.setattr(cell_verdicts, "config_dir", lambda: tmp_path)
    monkeypatch.setattr(cell_verdicts, "load_group_option", option)
    scale_of.cache_clear()
    try:
        got = {name: scale_of(name) for name in [*sizes, "m-noshape", "m-unknown"]}
    finally:
        scale_of.cache_clear()
    assert got == {
        "m-half": "~0.5B", "m-one": "~1B", "m-three": "~4B", "m-zero": "m-zero", "m-neg": "m-neg",
        "m-text": "m-text", "m-none": "m-none", "m-noshape": "m-noshape", "m-unknown": "m-unknown",
    }  # fmt: skip


def test_steps_text_and_seeds_by_key() -> None:
    assert steps_text([40, 40.0]) == "40" and steps_text([40, 38, 40]) == "40/38/40"
    assert steps_text([None, 40, float("nan")]) == "40" and steps_text([]) == ""
    seeds = pd.DataFrame({
        "method": ["mv", "mv", "mv", "gt"], "base_model": ["m", "m", "m", "m"], "dataset": ["d", "d", "d", "d"],
        "benchmark_key": ["math500", "math500", "aime24", "math500"], "metric": ["pass@1"] * 4,
        "value": [0.1, 0.2, 0.3, 0.4],
    })  # fmt: skip
    wanted = pd.DataFrame({"method": ["mv", "mv", "gt"], "base_model": ["m", "m", "x"], "dataset": ["d", "d", "d"],
                           "benchmark_key": ["math500"] * 3, "metric": ["pass@1"] * 3})  # fmt: skip
    got = seeds_by_key(seeds, wanted)
    assert list(got) == [("mv", "m", "d", "math500", "pass@1")]
    assert got[("mv", "m", "d", "math500", "pass@1")]["value"].tolist() == [0.1, 0.2]


# ---- claims ----------------------------------------------------------------------------------------------------------
ROW_8B, ROW_7B, ROW_2B = ("qwen3-8b-base", "math"), ("qwen2.5-7b", "math"), ("qwen3-1.7b-base", "math")


def compare(rows: tuple[tuple[str, str], ...], better: tuple[str, ...] = ("cr2",), worse: tuple[str, ...] = ("mv",)):
    return Claim("c", "II beats MV", "Table 1", "compare", rows, "math500", better, worse)


def scores_frame(per_cell: dict[Cell, list[np.ndarray]]) -> pd.DataFrame:
    """What claims.problem_scores returns: per cell (seed 0's id) and seed, its run's per-problem scores."""
    rows = []
    for cell, seeds in per_cell.items():
        for k, scores in enumerate(seeds):
            seed_id = Cell(cell.method, cell.base_model, cell.dataset, k).cell_id
            rows += [(cell.cell_id, seed_id, f"{seed_id}@run", f"p{p:02d}", s) for p, s in enumerate(scores)]
    return pd.DataFrame(rows, columns=["cell", "cell_id", "run_id", "problem_id", "score"])


def fake_scores(monkeypatch: pytest.MonkeyPatch, per_cell: dict[Cell, list[np.ndarray]]) -> list[tuple[Any, ...]]:
    calls: list[tuple[Any, ...]] = []

    def problem_scores(con: Any, cells: list[Cell], benchmark: str, checker: str) -> pd.DataFrame:
        calls.append((con, list(cells), benchmark, checker))
        return scores_frame(per_cell)

    monkeypatch.setattr(claims, "problem_scores", problem_scores)
    return calls


def test_claim_cells() -> None:
    claim = compare((ROW_8B, ROW_7B), better=("cr2", "cr3"))
    assert claim.cells() == [Cell("cr2", *ROW_8B), Cell("cr3", *ROW_8B), Cell("mv", *ROW_8B),
                             Cell("cr2", *ROW_7B), Cell("cr3", *ROW_7B), Cell("mv", *ROW_7B)]  # fmt: skip
    stable = Claim("s", "t", "Fig. 1", "stable", (ROW_8B, ROW_2B), method="cr2", by_step=50)
    assert stable.cells() == [Cell("cr2", *ROW_8B), Cell("cr2", *ROW_2B)]


def test_cell_replicates_by_source() -> None:
    seeds = [rights(20, 12), rights(20, 15)]
    reps, source = claims._cell_replicates(seeds, 0.3, 400, np.random.default_rng(9))
    inner = int(np.random.default_rng(9).integers(1 << 31))
    assert source == SEEDS_AND_PROBLEMS and np.array_equal(reps, two_level_replicates(seeds, 400, inner))
    one = [np.array([0.0, 0.0, 1.0, 1.0, 1.0])]  # mean 0.6; its problem-resampled mean has variance 0.24 / 5
    alone, source = claims._cell_replicates(one, None, 20_000, np.random.default_rng(4))
    assert source == PROBLEMS_ONLY and alone.shape == (20_000,)
    assert alone.mean() == pytest.approx(0.6, abs=0.01) and alone.var() == pytest.approx(0.048, rel=0.05)
    assert set(np.unique(alone)) <= {0.0, 0.2, 0.4, 0.6, 0.8, 1.0} and alone.min() < alone.max()
    widened, source = claims._cell_replicates(one, 0.0225, 20_000, np.random.default_rng(4))  # + N(0, 0.15^2)
    assert source == BORROWED and widened.var() == pytest.approx(0.048 + 0.0225, rel=0.05)
    assert widened.mean() == pytest.approx(0.6, abs=0.01)


def test_a_compare_claim_by_hand(monkeypatch: pytest.MonkeyPatch) -> None:
    """cr2: seeds at 24, 28, 26 of 40 (0.60, 0.70, 0.65), mv: 22 and 25 of 40 (0.55, 0.625): effect 0.0625. Seed
    variances 0.0025 and 0.0028125 average to 0.00265625; c = (1 + 1) / 1 row = 2, so the per-seed sd of the effect
    is sqrt(2 x 0.00265625 / 2) = 0.0515 and 2 x (1.96 x 0.0515 / 0.0625)^2 = 5.2 -> 6 seeds."""
    cr2, mv = Cell("cr2", *ROW_8B), Cell("mv", *ROW_8B)
    calls = fake_scores(monkeypatch, {cr2: [rights(40, 24), rights(40, 28), rights(40, 26)],
                                      mv: [rights(40, 22), rights(40, 25)]})  # fmt: skip
    claim = compare((ROW_8B,))
    result = claims._compare("con", claim, "strict", 3000, 7)  # type: ignore[arg-type]
    assert calls == [("con", [cr2, mv], "math500", "strict")] and result.claim is claim
    assert result.effect == pytest.approx(0.0625) and result.seeds_needed == 6
    assert result.low is not None and result.high is not None and result.low < 0.0625 < result.high
    assert result.verdict == (HOLDS if result.low > 0 else FAILS if result.high < 0 else claims.UNDECIDED)
    assert (result.variance, result.seeds, result.note, result.missing) == (SEEDS_AND_PROBLEMS, 2, "", [])
    assert result.runs == sorted(f"{Cell(c.method, *ROW_8B, k).cell_id}@run" for c, n in ((cr2, 3), (mv, 2))
                                 for k in range(n))  # fmt: skip
    # the interval: the 2.5% and 97.5% quantiles of cr2's replicates minus mv's, drawn in the claim's cell order
    rng = np.random.default_rng(7)
    better = claims._cell_replicates([rights(40, 24), rights(40, 28), rights(40, 26)], None, 3000, rng)[0]
    worse = claims._cell_replicates([rights(40, 22), rights(40, 25)], None, 3000, rng)[0]
    assert (result.low, result.high) == tuple(np.quantile(better - worse, [0.025, 0.975]))


def test_the_seeds_of_a_cell_are_taken_in_cell_id_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """The store's seeds in another order (each cell's last seed first) give the same interval: a cell's seeds are
    resampled in cell_id order."""
    cr2, mv = Cell("cr2", *ROW_8B), Cell("mv", *ROW_8B)
    fake_scores(
        monkeypatch, {cr2: [rights(40, 24), rights(40, 28), rights(40, 26)], mv: [rights(40, 22), rights(40, 25)]}
    )
    frame = claims.problem_scores("con", [], "math500", "strict")
    in_order = claims._compare("con", compare((ROW_8B,)), "strict", 500, 3)  # type: ignore[arg-type]
    blocks = [group for _, group in frame.groupby("cell_id", sort=True)][::-1]  # each seed's problems kept in order
    monkeypatch.setattr(claims, "problem_scores", lambda *args: pd.concat(blocks, ignore_index=True))
    reversed_rows = claims._compare("con", compare((ROW_8B,)), "strict", 500, 3)  # type: ignore[arg-type]
    assert (reversed_rows.low, reversed_rows.high) == (in_order.low, in_order.high)


def test_compare_claims_that_hold_fail_or_lack_seeds(monkeypatch: pytest.MonkeyPatch) -> None:
    cr2, mv = Cell("cr2", *ROW_8B), Cell("mv", *ROW_8B)
    fake_scores(monkeypatch, {cr2: [rights(60, 48), rights(60, 45), rights(60, 50)], mv: [rights(60, 20)] * 2})
    held = claims._compare("con", compare((ROW_8B,)), "strict", 500, 0)  # type: ignore[arg-type]
    assert held.verdict == HOLDS and held.low is not None and held.low > 0
    failed = claims._compare("con", compare((ROW_8B,), ("mv",), ("cr2",)), "strict", 500, 0)  # type: ignore[arg-type]
    assert failed.verdict == FAILS and failed.high is not None and failed.high < 0
    assert failed.effect == pytest.approx(-(143 / 180 - 1 / 3))
    # one seed each and nothing to borrow: undecided, however large the effect
    fake_scores(monkeypatch, {cr2: [rights(60, 55)], mv: [rights(60, 5)]})
    alone = claims._compare("con", compare((ROW_8B,)), "strict", 500, 0)  # type: ignore[arg-type]
    assert (alone.verdict, alone.variance, alone.seeds, alone.seeds_needed) == (
        claims.UNDECIDED,
        PROBLEMS_ONLY,
        1,
        None,
    )
    assert alone.note == "one seed and no seed variance to borrow: run more seeds"
    assert alone.effect == pytest.approx(50 / 60) and alone.low is not None and alone.low > 0.6
    # a cell without a scored run: named, nothing computed
    fake_scores(monkeypatch, {cr2: [rights(60, 55)]})
    claim = compare((ROW_8B,))
    missing = claims._compare("con", claim, "strict", 500, 0)  # type: ignore[arg-type]
    assert (missing.verdict, missing.missing, missing.effect) == (claims.UNDECIDED, [mv.cell_id], None)
    assert missing.claim is claim
    assert missing.note == "cells without a scored run" and missing.runs == [f"{cr2.cell_id}@run"]


def test_a_one_seed_row_borrows_from_its_scale_and_the_weakest_variance_labels_the_claim(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two rows, two better methods: 8B with three seeds of each, 7B (the same ~8B scale) with one. c = (1/2 + 1) / 2
    rows = 0.75 weighs the mean of the pooled variances."""
    per_cell = {}
    for method, right in (("cr2", (40, 44, 42)), ("cr3", (46, 41, 45)), ("mv", (20, 23, 24))):
        per_cell[Cell(method, *ROW_8B)] = [rights(60, r) for r in right]
        per_cell[Cell(method, *ROW_7B)] = [rights(60, right[0] - 3)]
    fake_scores(monkeypatch, per_cell)
    claim = compare((ROW_8B, ROW_7B), better=("cr2", "cr3"))
    result = claims._compare("con", claim, "strict", 400, 1)  # type: ignore[arg-type]
    assert (result.variance, result.seeds) == (BORROWED, 1) and result.verdict == HOLDS
    assert result.note == "one-seed cells borrow the seed variance of their method and scale"
    means = {c: float(np.mean([s.mean() for s in seeds])) for c, seeds in per_cell.items()}
    rows = [(means[Cell("cr2", *r)] + means[Cell("cr3", *r)]) / 2 - means[Cell("mv", *r)] for r in (ROW_8B, ROW_7B)]
    assert result.effect == pytest.approx(np.mean(rows))
    variances = [seed_variance([r / 60 for r in right]) for right in ((40, 44, 42), (46, 41, 45), (20, 23, 24))]
    sd = math.sqrt(0.75 * float(np.mean(variances)) / 2)
    assert result.seeds_needed == seeds_to_decide(float(np.mean(rows)), sd) == 2
    # a ~2B row has no scale to borrow from: the claim is as weak as its weakest cell
    for method in ("cr2", "cr3", "mv"):
        per_cell[Cell(method, *ROW_2B)] = per_cell.pop(Cell(method, *ROW_7B))
    weakest = claims._compare("con", compare((ROW_8B, ROW_2B), better=("cr2", "cr3")), "strict", 400, 1)  # type: ignore[arg-type]
    assert (weakest.variance, weakest.verdict) == (PROBLEMS_ONLY, claims.UNDECIDED)


def test_seeds_needed_for_a_small_effect(monkeypatch: pytest.MonkeyPatch) -> None:
    """Seed means cr2 0.70, 0.74, 0.72 (variance 0.0004) and mv 0.69, 0.71 (0.0002): effect 0.02, sd
    sqrt(2 x 0.0003 / 2) = 0.0173, 2 x (1.96 x 0.0173 / 0.02)^2 = 5.8 -> 6 seeds."""
    cr2, mv = Cell("cr2", *ROW_8B), Cell("mv", *ROW_8B)
    fake_scores(monkeypatch, {cr2: [rights(100, 70), rights(100, 74), rights(100, 72)],
                              mv: [rights(100, 69), rights(100, 71)]})  # fmt: skip
    result = claims._compare("con", compare((ROW_8B,)), "strict", 300, 2)  # type: ignore[arg-type]
    assert result.effect == pytest.approx(0.02) and result.seeds_needed == 6


def test_an_interval_that_touches_zero_decides_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """cr2 right on every problem (its replicates are all 1); mv's seeds [1, 0, 1] and [1, 1, 0, 1] resample to all
    right with probability 8/27 and 81/256, so about 9% of mv's replicates are 1 and the effect's 2.5% quantile is
    exactly 0: not above 0, so undecided (and, the other way round, a 97.5% quantile of exactly 0 is not below)."""
    cr2, mv = Cell("cr2", *ROW_8B), Cell("mv", *ROW_8B)
    fake_scores(monkeypatch, {cr2: [np.ones(3), np.ones(4)], mv: [np.array([1.0, 0.0, 1.0]), np.array([1.0, 1, 0, 1])]})
    touching = claims._compare("con", compare((ROW_8B,)), "strict", 2000, 0)  # type: ignore[arg-type]
    assert touching.low == 0.0 and touching.high is not None and touching.high > 0
    assert touching.verdict == claims.UNDECIDED and touching.variance == SEEDS_AND_PROBLEMS
    reverse = claims._compare("con", compare((ROW_8B,), ("mv",), ("cr2",)), "strict", 2000, 0)  # type: ignore[arg-type]
    assert reverse.high == 0.0 and reverse.verdict == claims.UNDECIDED


def test_seeds_needed_weighs_the_methods_and_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two better methods, two worse, two rows of the same ~8B scale, three seeds each (of 100 problems): the seed
    variances are cr2 0.0004, cr3 0.0004, mv 0.0001, gt 0.0004 (mean 0.000325), the effect 0.725 - 0.71 = 0.015 in
    each row; c = (1/2 + 1/2) / 2 rows = 0.5, so n = 2 (1.96 sqrt(0.5 x 0.000325 / 2) / 0.015)^2 = 2.8 -> 3."""
    rights_by_method = {"cr2": (70, 74, 72), "cr3": (71, 73, 75), "mv": (70, 72, 71), "gt": (69, 73, 71)}
    per_cell = {}
    for method, right in rights_by_method.items():
        per_cell[Cell(method, *ROW_8B)] = [rights(100, r) for r in right]
        per_cell[Cell(method, *ROW_7B)] = [rights(100, r - 10) for r in right]
    fake_scores(monkeypatch, per_cell)
    claim = compare((ROW_8B, ROW_7B), better=("cr2", "cr3"), worse=("mv", "gt"))
    result = claims._compare("con", claim, "strict", 300, 4)  # type: ignore[arg-type]
    assert result.effect == pytest.approx(0.015) and result.seeds_needed == 3
    assert result.variance == SEEDS_AND_PROBLEMS and result.seeds == 3


def runs_frame(rows: list[tuple[str, str, float | None]]) -> pd.DataFrame:
    """What claims._latest_runs returns: run_id, cell_id, cell (seed 0's id), last_step."""
    return pd.DataFrame(
        [(run, cell, cell.split("__seed")[0], step) for run, cell, step in rows],
        columns=["run_id", "cell_id", "cell", "last_step"],
    )


def fake_stable(monkeypatch: pytest.MonkeyPatch, runs: pd.DataFrame, events: list[tuple[str, int]]) -> list[Any]:
    calls: list[Any] = []

    def collapse_inputs(con: Any, ids: list[str]) -> str:
        calls.append(("inputs", con, list(ids)))
        return "inputs"

    def collapse_events(inputs: Any, rules: CollapseRules) -> pd.DataFrame:
        calls.append(("events", inputs, rules))
        return pd.DataFrame(events, columns=["run_id", "step"])

    monkeypatch.setattr(claims, "_latest_runs", lambda con, cells: runs)
    monkeypatch.setattr(claims, "collapse_inputs", collapse_inputs)
    monkeypatch.setattr(claims, "collapse_events", collapse_events)
    return calls


A8, A2 = Cell("cr2", *ROW_8B).cell_id, Cell("cr2", *ROW_2B).cell_id


def stable(collapses: bool = False) -> Claim:
    return Claim("s", "t", "Fig. 1", "stable", (ROW_8B, ROW_2B), method="cr2", by_step=50, collapses=collapses)


def test_a_stable_claim_by_its_collapse_events(monkeypatch: pytest.MonkeyPatch) -> None:
    runs = runs_frame([("r1", A8, 60), ("r2", f"{A8}__seed1", 50), ("r3", A2, 80)])
    rules = CollapseRules(margin=0.2)
    calls = fake_stable(monkeypatch, runs, [("r2", 51), ("r3", 90)])  # both after step 50
    claim = stable()
    held = claims._stable("con", claim, rules)  # type: ignore[arg-type]
    assert calls == [("inputs", "con", ["r1", "r2", "r3"]), ("events", "inputs", rules)] and held.claim is claim
    assert (held.verdict, held.effect, held.variance, held.seeds, held.runs) == (HOLDS, 0.0, "collapse rules", 1,
                                                                                 ["r1", "r2", "r3"])  # fmt: skip
    assert held.note == "" and held.missing == []
    fake_stable(monkeypatch, runs, [("r2", 50), ("r3", 90)])  # r2 collapses at step 50 itself
    failed = claims._stable("con", stable(), rules)  # type: ignore[arg-type]
    assert (failed.verdict, failed.effect) == (FAILS, pytest.approx(1 / 3))
    short = runs_frame([("r1", A8, 60), ("r2", f"{A8}__seed1", 49), ("r3", A2, None)])
    fake_stable(monkeypatch, short, [])
    waiting = claims._stable("con", stable(), rules)  # type: ignore[arg-type]
    assert (waiting.verdict, waiting.note, waiting.effect) == (claims.UNDECIDED, "runs have not reached step 50", 0.0)
    # by step 1: a run without a recorded last step has not reached it
    first = Claim("s1", "t", "Fig. 1", "stable", (ROW_8B,), method="cr2", by_step=1)
    fake_stable(monkeypatch, runs_frame([("r1", A8, 1), ("r2", f"{A8}__seed1", None)]), [])
    assert claims._stable("con", first, rules).verdict == claims.UNDECIDED  # type: ignore[arg-type]
    fake_stable(monkeypatch, runs_frame([("r1", A8, 1), ("r2", f"{A8}__seed1", 1)]), [])
    assert claims._stable("con", first, rules).verdict == HOLDS  # type: ignore[arg-type]


def test_a_collapse_claim_needs_a_collapse_in_every_row(monkeypatch: pytest.MonkeyPatch) -> None:
    runs = runs_frame([("r1", A8, 60), ("r2", f"{A8}__seed1", 60), ("r3", A2, 80), ("r4", f"{A2}__seed1", 30)])
    fake_stable(monkeypatch, runs, [("r2", 20), ("r4", 10)])
    assert claims._stable("con", stable(True), CollapseRules()).verdict == HOLDS  # type: ignore[arg-type]
    fake_stable(monkeypatch, runs, [("r2", 20), ("r3", 70)])  # the 2B row: r3 after step 50, r4 not there yet
    pending = claims._stable("con", stable(True), CollapseRules())  # type: ignore[arg-type]
    assert (pending.verdict, pending.note) == (claims.UNDECIDED, "runs have not reached step 50")
    done = runs_frame([("r1", A8, 60), ("r3", A2, 80), ("r4", f"{A2}__seed1", 55)])
    fake_stable(monkeypatch, done, [("r1", 20)])  # the 2B row reached step 50 on both seeds without a collapse
    failed = claims._stable("con", stable(True), CollapseRules())  # type: ignore[arg-type]
    assert (failed.verdict, failed.seeds, failed.effect) == (FAILS, 1, pytest.approx(1 / 3))


def test_a_stable_claim_with_missing_cells(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = fake_stable(monkeypatch, runs_frame([("r1", A8, 60)]), [])
    result = claims._stable("con", stable(), CollapseRules())  # type: ignore[arg-type]
    assert (result.verdict, result.missing, result.note, result.runs) == (claims.UNDECIDED, [A2], "cells without a run",
                                                                          ["r1"])  # fmt: skip
    assert (result.effect, result.seeds) == (0.0, 1)
    calls = fake_stable(monkeypatch, runs_frame([]), [])
    empty = claims._stable("con", stable(), CollapseRules())  # type: ignore[arg-type]
    assert calls == [] and (empty.effect, empty.seeds, empty.missing) == (None, 0, [A8, A2])


def test_evaluate_claims_checks_the_checker_and_passes_its_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[Any, ...]] = []

    def fake_compare(con: Any, claim: Claim, checker: str, samples: int, rng_seed: int) -> ClaimResult:
        seen.append(("compare", con, claim.id, checker, samples, rng_seed))
        return ClaimResult(claim, HOLDS)

    def fake_stable_claim(con: Any, claim: Claim, rules: CollapseRules) -> ClaimResult:
        seen.append(("stable", con, claim.id, rules))
        return ClaimResult(claim, FAILS)

    monkeypatch.setattr(claims, "_compare", fake_compare)
    monkeypatch.setattr(claims, "_stable", fake_stable_claim)
    rules = CollapseRules(window=3)
    got = evaluate_claims("con", [stable(), compare((ROW_8B,))], "strict", 77, 5, rules)  # type: ignore[arg-type]
    assert [r.verdict for r in got] == [FAILS, HOLDS]
    assert seen == [("stable", "con", "s", rules), ("compare", "con", "c", "strict", 77, 5)]
    seen.clear()
    evaluate_claims("con", [compare((ROW_8B,)), stable()])  # type: ignore[arg-type]
    assert seen == [("compare", "con", "c", "math_verify", 2000, 0), ("stable", "con", "s", claims.RULES)]
    with pytest.raises(ValueError, match=r"^checker='exact': one of math_verify, strict$"):
        evaluate_claims("con", [], "exact")  # type: ignore[arg-type]
