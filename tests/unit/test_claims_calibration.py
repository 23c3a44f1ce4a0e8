"""The claims rule calibrated by simulation (results/calibration.py): on stores whose truth is known, identical
methods are declared different in at most 5% of stores (within the Monte-Carlo error) at 2, 3, 5 and 10 seeds and
seed-to-problem variance ratios of 0.1, 1 and 10, with their own seeds or borrowing within their family and size; a
lender of another family is never used; and the effect the power formula designs is found in about 80% of stores.
The larger sweep: perf/claims_calibration.py (figures in docs/results.md)."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from corewarding.matrix import Cell
from corewarding.results.calibration import Setting, calibrate, designed_effect, simulate, weights
from corewarding.results.claim_rule import decide
from corewarding.results.claims import Claim, evaluate_claims
from corewarding.results.store.store import reader, writer

SEEDS, RATIOS = (2, 3, 5, 10), (0.1, 1.0, 10.0)
SETTINGS = list(itertools.product(SEEDS, RATIOS))


def _within_five_percent(decided: float, error: float) -> bool:
    return decided - 2 * error <= 0.05


@pytest.mark.parametrize(("seeds", "ratio"), SETTINGS, ids=[f"{s}seeds-ratio{r:g}" for s, r in SETTINGS])
def test_identical_methods_are_declared_different_in_at_most_5_percent(seeds: int, ratio: float) -> None:
    own = calibrate(Setting(seeds, ratio), stores=300, rng_seed=seeds * 100 + int(ratio * 10))
    assert _within_five_percent(own.decided_rate, own.error), (own.decided, own.stores)
    borrowed = calibrate(Setting(seeds, ratio, layout="borrowed"), stores=200, rng_seed=7 + seeds)
    assert _within_five_percent(borrowed.decided_rate, borrowed.error), (borrowed.decided, borrowed.stores)


@pytest.mark.parametrize(("seeds", "ratio"), SETTINGS, ids=[f"{s}seeds-ratio{r:g}" for s, r in SETTINGS])
def test_the_designed_effect_is_found_in_about_80_percent(seeds: int, ratio: float) -> None:
    setting = Setting(seeds, ratio)
    effect = designed_effect(setting)
    if setting.base + effect > 0.95:  # no score within [0, 1] can show it: said in docs/results.md, not tested
        pytest.skip(f"the designed effect {effect:.2f} leaves the score's range at {seeds} seeds, ratio {ratio:g}")
    found = calibrate(Setting(seeds, ratio, effect), stores=300, rng_seed=1000 + seeds)
    # about 80% where seed variance matters; more where the (well-measured) problem variance dominates at 2 seeds,
    # since the plan counts the seeds' degrees of freedom only: it asks for more seeds, never fewer
    rate = found.right / found.stores
    assert rate >= 0.68 and (rate <= 0.92 or (seeds == 2 and ratio < 1)), (found.right, found.stores, effect)


def test_a_lender_of_another_family_is_never_used() -> None:
    """The second row is Llama-3.2-3B with one seed and six times the seed variance of Qwen3-4B's row: borrowing
    across families would declare identical methods different; the rule stays undecided instead."""
    for seeds in (2, 10):
        mismatched = calibrate(Setting(seeds, 10.0, layout="mismatched"), stores=100, rng_seed=seeds)
        assert mismatched.decided == 0


def test_a_simulated_store_gives_the_pure_rules_verdict(tmp_path: Path) -> None:
    """One simulated claim written into a real store (runs, per-sample verdicts) and read by evaluate_claims gives the
    same effect, interval and lenders as the rule on the simulated arrays."""
    setting = Setting(3, 1.0, effect=0.08, layout="borrowed", problems=60)
    arrays = simulate(setting, np.random.default_rng(5))
    rows = {"row0": ("qwen3-4b-base", "math"), "row1": ("qwen3-4b-base", "dapo14k")}
    methods = {"better": "co_rewarding_2", "worse": "majority_voting"}
    db = tmp_path / "sim.duckdb"
    with writer(db) as con:
        for name, per_seed in arrays.items():
            side, row = name.split("@")
            for k, scores in enumerate(per_seed):
                cell = Cell(methods[side], *rows[row], k)
                run_id = f"{cell.cell_id}@sim"
                con.execute(
                    "INSERT INTO runs (run_id, cell_id, method, base_model, dataset, status, started_at, last_step) "
                    "VALUES (?, ?, ?, ?, ?, 'finished', now(), 10)",
                    [run_id, cell.cell_id, cell.method, cell.base_model, cell.dataset],
                )
                con.executemany(
                    "INSERT INTO eval_samples (run_id, step, benchmark, problem_id, sample_index, correct_strict, "
                    "correct_math_verify) VALUES (?, 10, 'MATH500', ?, 0, ?, ?)",
                    [(run_id, f"p{p:03d}", bool(v), bool(v)) for p, v in enumerate(scores)],
                )
    claim = Claim("sim", "II beats MV", "Table 1", "compare", tuple(rows.values()), "math500",
                  (methods["better"],), (methods["worse"],))  # fmt: skip
    with reader(db) as con:
        [stored] = evaluate_claims(con, [claim])
    ids = {name: Cell(methods[name.split("@")[0]], *rows[name.split("@")[1]]).cell_id for name in arrays}
    groups = {ids[name]: (methods[name.split("@")[0]], "qwen3-4b") for name in arrays}
    pure = decide({ids[n]: a for n, a in arrays.items()}, {ids[n]: w for n, w in weights(setting).items()}, groups)
    assert stored.verdict == pure.verdict and stored.variance == pure.variance == "problems+borrowed seed variance"
    assert (stored.effect, stored.low, stored.high) == pytest.approx((pure.effect, pure.low, pure.high))
    assert [(d["cell"], d["df"]) for d in stored.lenders] == list(pure.lenders) == [
        ("co_rewarding_2__qwen3-4b-base__math", 2), ("majority_voting__qwen3-4b-base__math", 2),
    ]  # fmt: skip
    assert stored.seeds_needed == pure.seeds_needed and stored.seeds_needed is not None
