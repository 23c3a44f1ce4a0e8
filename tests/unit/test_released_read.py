"""``released_comparison``: paper · released · reproduced on a hand-written store (tests/support/released_store.py),
every number and verdict computed by hand."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest

from corewarding.results.released_read import UNDECIDED_RELEASED as UNDECIDED
from corewarding.results.released_read import released_comparison, settings_listing
from tests.support import released_store
from tests.support.released_store import C3, GT, NEW_RUN


@pytest.fixture(scope="module")
def con(tmp_path_factory: pytest.TempPathFactory) -> Iterator[duckdb.DuckDBPyConnection]:
    db = released_store.build(tmp_path_factory.mktemp("released") / "results.duckdb")
    connection = duckdb.connect(str(db), read_only=True)
    yield connection
    connection.close()


def _row(frame: pd.DataFrame, cell: str, bench: str, seed: int | None = None) -> pd.Series:
    rows = frame[(frame["cell_id"] == cell) & (frame["benchmark"] == bench)]
    if seed is not None:
        rows = rows[rows["released_settings"].str.contains(f'"seed": {seed}')]
    assert len(rows) == 1, rows
    return rows.iloc[0]


def test_each_released_setting_is_a_row_beside_the_newest_runs_latest_step(con: duckdb.DuckDBPyConnection) -> None:
    frame = released_comparison(con, None, "math_verify")
    assert len(frame) == 4  # GT: MATH500 x 2 seeds + GSM8K; C3: MATH500 (the strict row is another checker's)
    seed0, seed1 = _row(frame, GT, "MATH500", 0), _row(frame, GT, "MATH500", 1)
    assert (seed0["released"], seed0["released_ci_low"], seed0["released_ci_high"]) == (81.23, 78.0, 84.0)
    assert (seed1["released"], seed1["released_ci_low"], seed1["released_ci_high"]) == (76.5, 74.0, 79.0)
    for row in (seed0, seed1):  # never averaged; both beside the same reproduction: the newer run's step 20
        assert (row["paper"], row["reproduced"], row["reproduced_ci_low"], row["reproduced_ci_high"]) == (
            80.0, 71.23, 68.0, 74.5,
        )  # fmt: skip
        assert (row["reproduced_step"], row["run_id"], row["released_revision"]) == (20, NEW_RUN, "0a1b2c3")
        assert row["settings_differ"] == "seed"  # seed 0 matches the run: named from its seed-1 sibling
    # paper 80 inside [78, 84], reproduced [68, 74.5] below it; paper 80 above [74, 79] (its borrowed seed variance
    # is narrower than its problem interval), which meets the reproduced interval at 74
    assert (seed0["paper_vs_released"], seed0["released_vs_reproduced"]) == ("within released CI", "CIs disjoint")
    assert (seed1["paper_vs_released"], seed1["released_vs_reproduced"]) == ("outside released CI", "CIs overlap")


def test_missing_sides_are_named_not_compared(con: duckdb.DuckDBPyConnection) -> None:
    frame = released_comparison(con, None, "math_verify")
    gsm8k = _row(frame, GT, "GSM8K")  # the run's GSM8K row has no interval and was stored without settings
    assert (gsm8k["paper"], gsm8k["released"], gsm8k["reproduced"]) == (90.0, 91.0, 85.0)
    assert (gsm8k["paper_vs_released"], gsm8k["released_vs_reproduced"]) == ("within released CI", "no CI")
    assert gsm8k["settings_differ"] == "settings unknown"
    c3 = _row(frame, C3, "MATH500")  # no paper value, no run
    assert pd.isna(c3["paper"]) and pd.isna(c3["reproduced"]) and pd.isna(c3["reproduced_step"])
    assert (c3["paper_vs_released"], c3["released_vs_reproduced"], c3["settings_differ"]) == (
        "no paper value", "not reproduced", "",
    )  # fmt: skip


def test_cells_and_checker_filter_the_rows(con: duckdb.DuckDBPyConnection) -> None:
    assert released_comparison(con, [C3], "math_verify")["cell_id"].tolist() == [C3]
    assert released_comparison(con, [], "math_verify").empty
    strict = released_comparison(con, [GT], "strict")  # the run has no strict score
    assert strict["released"].tolist() == [50.0] and strict["reproduced"].isna().all()
    assert strict["released_vs_reproduced"].tolist() == ["not reproduced"]


def test_the_settings_are_listed_per_column(con: duckdb.DuckDBPyConnection) -> None:
    listing = settings_listing(released_comparison(con, [GT], "math_verify"))
    assert sorted((c, str(s)) for c, s in zip(listing["column"], listing["seed"], strict=True)) == [
        ("released", "0"), ("released", "1"), ("reproduced", "0"), ("reproduced", "None"),
    ]  # fmt: skip
    released0 = listing[(listing["column"] == "released") & (listing["seed"] == 0)].iloc[0]
    assert released0["backend"] == "vllm 0.10.1" and released0["checker"] == "math_verify 0.8.0"
    assert released0["max_new_tokens"] == 3072 and released0["prompt"].endswith("…") and len(released0["prompt"]) == 61
    assert listing["settings_key"].tolist().count("not recorded") == 1  # the run's GSM8K row, stored without settings


def test_with_no_seed_variance_to_borrow_outside_and_disjoint_are_undecided(tmp_path: Path) -> None:
    """The same released and reproduced numbers, without the Qwen3-4B cell that has seeds: on problem variance alone
    the paper's 80 above [74, 79] and [78, 84] apart from [68, 74.5] say nothing, and the verdicts say so."""
    db = released_store.build(tmp_path / "results.duckdb", seeded_neighbour=False)
    with duckdb.connect(str(db), read_only=True) as con:
        frame = released_comparison(con, None, "math_verify")
    seed0, seed1 = _row(frame, GT, "MATH500", 0), _row(frame, GT, "MATH500", 1)
    assert (seed0["reproduced_ci_low"], seed0["reproduced_ci_high"]) == (68.0, 74.5)  # not widened
    assert (seed0["paper_vs_released"], seed0["released_vs_reproduced"]) == ("within released CI", UNDECIDED)
    assert (seed1["paper_vs_released"], seed1["released_vs_reproduced"]) == (UNDECIDED, "CIs overlap")
    assert seed0["released_interval"] == seed0["reproduced_interval"] == "problems only"


def test_the_reproduction_is_the_mean_over_the_cells_seeds(tmp_path: Path) -> None:
    """A second seed of GT scores 75.23 [72, 78.5] at step 20: the reproduction is (71.23 + 75.23) / 2 = 73.23 over
    2 seeds; the seeds' sample variance 0.0008 (above the problem variance (0.065 / 3.92)^2) over 2 seeds, at t(1)."""
    db = released_store.build(tmp_path / "results.duckdb")
    with duckdb.connect(str(db)) as con:
        con.execute(
            "INSERT INTO runs (run_id, cell_id, method, base_model, dataset, status, started_at, last_step) "
            f"VALUES ('{GT}__seed1@x', '{GT}__seed1', 'gt_grpo', 'qwen3-4b-base', 'math', 'finished', now(), 20)"
        )
        con.execute(
            "INSERT INTO eval_metrics (run_id, step, benchmark, benchmark_key, checker, metric, value, ci_low, "
            f"ci_high, n, source) VALUES ('{GT}__seed1@x', 20, 'MATH500', 'math500', 'math_verify', 'pass@1', 0.7523, "
            "0.72, 0.785, 1, 'reproduced')"
        )
    with duckdb.connect(str(db), read_only=True) as con:
        row = _row(released_comparison(con, [GT], "math_verify"), GT, "MATH500", 0)
    assert (row["reproduced"], row["reproduced_seeds"], row["run_id"]) == (73.23, 2, NEW_RUN)
    assert row["reproduced_interval"] == "seeds+problems"
    half = 12.706204736174694 * math.sqrt(float(np.var([0.7123, 0.7523], ddof=1)) / 2)
    assert (row["reproduced_ci_low"], row["reproduced_ci_high"]) == (
        round((0.7323 - half) * 100, 2), round((0.7323 + half) * 100, 2),
    )  # fmt: skip
