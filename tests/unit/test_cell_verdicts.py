"""Per-cell verdicts that know run-to-run variance, on stores the tests build: a cell's seeds averaged with a t
interval at k - 1 degrees of freedom, one seed undecided on problem variance alone, decided once it borrows a seed
variance from its method, model family and size (never from another family) or has seeds of its own, a base row
decisive."""

from __future__ import annotations

import math
from pathlib import Path

import duckdb
import pytest

from corewarding.matrix import Cell
from corewarding.results import cell_verdicts
from corewarding.results.cell_verdicts import OUTSIDE, UNDECIDED, WITHIN
from corewarding.results.ingest.ingestion import ensure_reference
from corewarding.results.read import paper_comparison
from corewarding.results.store.store import reader, writer

Z = 1.959963984540054  # the 97.5% normal quantile
T2 = 4.302652729749462  # the 97.5% t quantile at 2 degrees of freedom
MV_8B = Cell("majority_voting", "qwen3-8b-base", "math")  # Table 1 prints MATH500 pass@1 = 79.8
MV_8B_DAPO = Cell("majority_voting", "qwen3-8b-base", "dapo14k")  # the same method, family and size
MV_7B = Cell("majority_voting", "qwen2.5-7b", "math")  # Table 7 prints 74.4; another family (a mismatched lender)
PROBLEM_VARIANCE = (0.02 / Z) ** 2  # each score's stored problem interval is +- 0.02


def _score(con: duckdb.DuckDBPyConnection, cell: Cell, value: float, step: int | None = 100, half: float = 0.02) -> str:
    """A finished run of ``cell`` scored ``value`` +- ``half`` on math500 pass@1 (math_verify) at ``step``."""
    run_id = f"{cell.cell_id}@{abs(hash((value, step))) % 10**8:08d}"
    con.execute(
        "INSERT INTO runs (run_id, cell_id, method, base_model, dataset, status, started_at, last_step) "
        "VALUES (?, ?, ?, ?, ?, 'finished', now(), ?)",
        [run_id, cell.cell_id, cell.method, cell.base_model, cell.dataset, step],
    )
    con.execute(
        "INSERT INTO eval_metrics (run_id, step, benchmark, benchmark_key, checker, metric, value, ci_low, ci_high, "
        "n, num_problems) VALUES (?, ?, 'MATH500', 'math500', 'math_verify', 'pass@1', ?, ?, ?, 1, 500)",
        [run_id, step, value, value - half, value + half],
    )
    return run_id


def _store(tmp_path: Path, scores: dict[Cell, list[float]]) -> Path:
    """The paper's numbers and, per cell, one run per seed scored as listed (seed k: ``<cell_id>__seed<k>``)."""
    db = tmp_path / "cells.duckdb"
    with writer(db) as con:
        ensure_reference(con)
        for cell, values in scores.items():
            for k, value in enumerate(values):
                _score(con, Cell(cell.method, cell.base_model, cell.dataset, k), value)
    return db


def _row(db: Path, table: str, cell: Cell) -> dict[str, object]:
    with reader(db) as con:
        frame = paper_comparison(con, table, "math_verify")
    keep = (frame["method"] == cell.method) & (frame["base_model"] == cell.base_model)
    [row] = frame[keep & (frame["benchmark"] == "MATH500")].to_dict("records")
    return row


def test_one_seed_outside_its_problem_interval_is_undecided(tmp_path: Path) -> None:
    row = _row(_store(tmp_path, {MV_8B: [0.76]}), "Table 1", MV_8B)
    assert (row["measured"], row["ci_low"], row["ci_high"], row["seeds"]) == (76.0, 74.0, 78.0, 1)
    assert row["interval"] == "problems only" and row["verdict"] == UNDECIDED  # 79.8 lies above, at one seed


def test_one_seed_borrows_the_seed_variance_of_its_method_family_and_size(tmp_path: Path) -> None:
    """Majority-Voting on Qwen3-8B-Base's DAPO-14k cell has three seeds: 0.70, 0.74, 0.78, a per-seed variance of
    0.0016 (sd 0.04, above the problem floor) with 2 degrees of freedom. The MATH cell's one seed borrows it:
    half-width t(2) x 0.04 = 0.172, so 76.0 +- 17.21 holds the paper's 79.8; the lender is named with its df."""
    db = _store(tmp_path, {MV_8B: [0.76], MV_8B_DAPO: [0.70, 0.74, 0.78]})
    half = T2 * 0.04
    row = _row(db, "Table 1", MV_8B)
    assert row["interval"] == f"problems+borrowed seed variance (from {MV_8B_DAPO.cell_id} (df 2))"
    assert row["seeds"] == 1 and row["verdict"] == WITHIN
    assert (row["ci_low"], row["ci_high"]) == (round((0.76 - half) * 100, 2), round((0.76 + half) * 100, 2))


def test_a_lender_of_another_family_is_never_used(tmp_path: Path) -> None:
    """Qwen2.5-7B's three seeds vary little; Qwen3-8B-Base's one seed may not borrow them (another family): it stays
    undecided on its problem interval. The three seeds are one row: their mean, with a t interval at 2 df."""
    db = _store(tmp_path, {MV_8B: [0.76], MV_7B: [0.70, 0.74, 0.78]})
    row = _row(db, "Table 1", MV_8B)
    assert row["interval"] == "problems only" and row["verdict"] == UNDECIDED
    seeded = _row(db, "Table 7", MV_7B)
    half = T2 * math.sqrt(0.0016 / 3)
    assert (seeded["measured"], seeded["seeds"], seeded["interval"]) == (74.0, 3, "seeds+problems")
    assert (seeded["ci_low"], seeded["ci_high"]) == (round((0.74 - half) * 100, 2), round((0.74 + half) * 100, 2))
    assert seeded["verdict"] == WITHIN and len(str(seeded["seed_runs"]).split(", ")) == 3
    assert str(seeded["run_id"]).startswith(MV_7B.cell_id + "@")  # seed 0's run, the cell's own id


def test_the_same_cell_decided_with_three_seeds(tmp_path: Path) -> None:
    """Seeds 0.60, 0.61, 0.62: sample variance 0.0001, below the problem variance (0.02 / 1.96)^2 = 0.000104, which
    is the floor: half-width t(2) x sqrt(0.000104 / 3) = 2.53 points; the paper's 79.8 lies far outside."""
    row = _row(_store(tmp_path, {MV_8B: [0.60, 0.61, 0.62]}), "Table 1", MV_8B)
    half = T2 * math.sqrt(PROBLEM_VARIANCE / 3)
    assert (row["measured"], row["seeds"]) == (61.0, 3)
    assert (row["ci_low"], row["ci_high"]) == (round((0.61 - half) * 100, 2), round((0.61 + half) * 100, 2))
    assert row["verdict"] == OUTSIDE


def test_a_base_row_is_decided_on_its_problem_interval(tmp_path: Path) -> None:
    """A base model has no training run, so no seed variance: outside its problem interval is outside."""
    db = tmp_path / "cells.duckdb"
    with writer(db) as con:
        ensure_reference(con)
        _score(con, MV_8B, 0.76)
        _score(con, MV_8B, 0.60, step=None)  # the base-model evaluation of a run of Qwen3-8B-Base (paper: 72.4)
    with reader(db) as con:
        frame = paper_comparison(con, "Table 1", "math_verify")
    [base] = frame.loc[(frame["method"] == "base") & (frame["model"] == "Qwen3-8B-Base") &
                       (frame["benchmark"] == "MATH500")].to_dict("records")  # fmt: skip
    assert (base["measured"], base["ci_low"], base["ci_high"]) == (60.0, 58.0, 62.0)
    assert base["interval"] == cell_verdicts.BASE_MODEL and base["verdict"] == OUTSIDE
    assert base["checkpoint_step"] == "base model"


def test_the_policy_is_checked() -> None:
    with duckdb.connect() as con, pytest.raises(ValueError, match="latest or best"):
        cell_verdicts.seed_scores(con, "math_verify", "max")
