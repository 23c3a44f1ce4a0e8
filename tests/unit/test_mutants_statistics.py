"""Tests written against the mutants mutmut left alive in the claim and verdict statistics (`make mutants`,
docs/performance.md): cell_verdicts' and claims' rules on frames (the store readers replaced by fakes, so no DuckDB),
with uneven seeds and rates. The t-based rule itself: test_seed_variance.py and test_claims_calibration.py."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

from corewarding.matrix import Cell
from corewarding.results import claims
from corewarding.results.cell_verdicts import (
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
    seeds_by_key,
    steps_text,
    verdict_of,
)
from corewarding.results.claim_rule import FAILS, HOLDS
from corewarding.results.claims import Claim, ClaimResult, evaluate_claims
from corewarding.results.collapse import CollapseRules
from corewarding.results.seed_variance import (
    BORROWED,
    DIFFERS,
    MATCHES,
    PROBLEMS_ONLY,
    SEEDS_AND_PROBLEMS,
    Interval,
    Lent,
    one_seed_interval,
    verdict,
)


# ---- seed_variance -------------------------------------------------------------------------------------------------
def test_verdict_edges() -> None:
    measured = Interval(0.4, 0.3, 0.6, 2, SEEDS_AND_PROBLEMS)
    assert [verdict(v, measured) for v in (0.3, 0.6, 0.2999, 0.6001)] == [MATCHES, MATCHES, DIFFERS, DIFFERS]
    problems = Interval(0.4, 0.3, 0.6, 1, PROBLEMS_ONLY)
    assert [verdict(v, problems) for v in (0.3, 0.7)] == [MATCHES, "undecided"]
    assert verdict(0.7, Interval(0.4, 0.3, 0.6, 1, BORROWED)) == DIFFERS


# ---- cell_verdicts -------------------------------------------------------------------------------------------------
def seed_rows(values: list[float], lows: list[float | None], highs: list[float | None], metric: str = "pass@1"):
    n = len(values)
    return pd.DataFrame({
        "run_id": [f"r{k}" for k in range(n)], "step": [40 + k for k in range(n)], "benchmark": ["MATH500"] * n,
        "metric": [metric] * n, "value": values, "ci_low": lows, "ci_high": highs,
    })  # fmt: skip


def test_verdict_words_and_percent() -> None:
    seeded = Interval(0.61, 0.59, 0.63, 3, SEEDS_AND_PROBLEMS)
    assert verdict_of(0.60, 0.61, seeded) == WITHIN and verdict_of(0.70, 0.61, seeded) == OUTSIDE
    assert verdict_of(0.70, 0.61, Interval(0.61, 0.59, 0.63, 1, PROBLEMS_ONLY)) == UNDECIDED
    assert verdict_of(0.70, None, seeded) == NOT_MEASURED and verdict_of(None, None, None) == NOT_MEASURED
    assert verdict_of(None, 0.61, seeded) == NO_CI and verdict_of(0.70, 0.61, None) == NO_CI
    assert in_percent(Interval(0.456789, 0.101234, 0.987656, 2, BORROWED)) == Interval(45.68, 10.12, 98.77, 2, BORROWED)
    assert in_percent(None) is None


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


def test_claim_cells() -> None:
    claim = compare((ROW_8B, ROW_7B), better=("cr2", "cr3"))
    assert claim.cells() == [Cell("cr2", *ROW_8B), Cell("cr3", *ROW_8B), Cell("mv", *ROW_8B),
                             Cell("cr2", *ROW_7B), Cell("cr3", *ROW_7B), Cell("mv", *ROW_7B)]  # fmt: skip
    stable = Claim("s", "t", "Fig. 1", "stable", (ROW_8B, ROW_2B), method="cr2", by_step=50)
    assert stable.cells() == [Cell("cr2", *ROW_8B), Cell("cr2", *ROW_2B)]


def runs_frame(rows: list[tuple[str, str, float | None]]) -> pd.DataFrame:
    """What claim_scores.latest_runs returns: run_id, cell_id, cell (seed 0's id), last_step."""
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

    monkeypatch.setattr(claims, "latest_runs", lambda con, cells: runs)
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

    def fake_compare(con: Any, claim: Claim, checker: str) -> ClaimResult:
        seen.append(("compare", con, claim.id, checker))
        return ClaimResult(claim, HOLDS)

    def fake_stable_claim(con: Any, claim: Claim, rules: CollapseRules) -> ClaimResult:
        seen.append(("stable", con, claim.id, rules))
        return ClaimResult(claim, FAILS)

    monkeypatch.setattr(claims, "_compare", fake_compare)
    monkeypatch.setattr(claims, "_stable", fake_stable_claim)
    rules = CollapseRules(window=3)
    got = evaluate_claims("con", [stable(), compare((ROW_8B,))], "strict", rules)  # type: ignore[arg-type]
    assert [r.verdict for r in got] == [FAILS, HOLDS]
    assert seen == [("stable", "con", "s", rules), ("compare", "con", "c", "strict")]
    seen.clear()
    evaluate_claims("con", [compare((ROW_8B,)), stable()])  # type: ignore[arg-type]
    assert seen == [("compare", "con", "c", "math_verify"), ("stable", "con", "s", claims.RULES)]
    with pytest.raises(ValueError, match=r"^checker='exact': one of math_verify, strict$"):
        evaluate_claims("con", [], "exact")  # type: ignore[arg-type]


def test_one_seed_cells_and_base_rows() -> None:
    one = seed_rows([0.40], [0.30], [0.45])
    lent = Lent(0.0004, 3, (("a", 1), ("b", 2)))
    assert cell_interval(one, lent, confidence=0.9) == one_seed_interval(0.40, 0.30, 0.45, lent, 0.9)
    assert cell_interval(one, None) == Interval(0.40, 0.30, 0.45, 1, PROBLEMS_ONLY)
    for low, high in ((None, 0.45), (0.30, None), (float("nan"), 0.45), (0.30, float("nan"))):
        assert cell_interval(seed_rows([0.4], [low], [high]), lent) is None
        assert base_interval(0.4, low, high) is None
    assert base_interval(0.72, 0.69, 0.76) == Interval(0.72, 0.69, 0.76, 0, BASE_MODEL)


def test_pooled_variances_lend_within_a_method_family_and_size() -> None:
    def row(method: str, model: str, cell: str, value: float, metric: str = "pass@1") -> dict[str, Any]:
        return {"method": method, "base_model": model, "benchmark_key": "math500", "metric": metric,
                "cell_group": cell, "value": value, "ci_low": None, "ci_high": None}  # fmt: skip

    seeds = pd.DataFrame([
        row("mv", "qwen3-8b-base", "a", 0.60), row("mv", "qwen3-8b-base", "a", 0.66),
        row("mv", "qwen3-8b-base", "a", 0.69),  # variance 0.0021 on 2 df
        row("mv", "qwen3-8b-instruct", "b", 0.40), row("mv", "qwen3-8b-instruct", "b", 0.46),  # 0.0018 on 1 df
        row("mv", "qwen2.5-7b", "f", 0.30), row("mv", "qwen2.5-7b", "f", 0.50),  # another family: its own
        row("mv", "qwen3-1.7b-base", "c", 0.20),  # one seed: adds nothing
        row("mv", "qwen3-8b-base", "e", 0.51, metric="avg@16"),
    ])  # fmt: skip
    pooled = pooled_variances(seeds)
    assert set(pooled) == {("mv", "qwen3-8b", "math500", "pass@1"), ("mv", "qwen2.5-7b", "math500", "pass@1")}
    lent = pooled[("mv", "qwen3-8b", "math500", "pass@1")]
    assert lent.variance == pytest.approx((0.0042 + 0.0018) / 3) and lent.df == 3
    assert lent.lenders == (("a", 2), ("b", 1))
    assert borrowed_for(pooled, ("mv", "qwen3-8b-base", "math", "math500", "pass@1")) == lent
    assert borrowed_for(pooled, ("mv", "qwen2.5-7b", "math", "math500", "pass@1")).variance == pytest.approx(0.02)  # type: ignore[union-attr]
    assert borrowed_for(pooled, ("mv", "qwen3-8b-base", "math", "math500", "avg@16")) is None
