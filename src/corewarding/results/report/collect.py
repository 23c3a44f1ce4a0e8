"""The reproduction report's gathering: SQL on a read-only connection to plain values (``ReportData``).

It uses the same queries as the dashboard's paper page (``corewarding.results.read``): per benchmark, each paper cell
of the matrix beside the measured value, its bootstrap interval and the difference; the matrix's cells without a
paper value; the audited released checkpoints (``released_read``); failed attempts, GPU-hours, claims and the collapse
events of the matrix's runs. ``render`` turns them into HTML.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

import duckdb
import pandas as pd

from corewarding.config import config_dir
from corewarding.matrix import Cell, matrix_of, parse_cell_id
from corewarding.results import ledger
from corewarding.results.claims import ClaimResult, evaluate_claims, load_claims
from corewarding.results.collapse import CollapseRules, collapse_events
from corewarding.results.ingest.attempts import failed_cells
from corewarding.results.names import name_sql
from corewarding.results.read import (
    NO_PAPER_VALUE,
    collapse_inputs,
    paper_comparison,
    paper_tables,
    runs_without_paper_value,
)
from corewarding.results.released_read import released_comparison, unaudited

log = logging.getLogger(__name__)

FAILED = "FAILED (current config)"  # the cell's newest attempt failed: a stored value is not its result
DEFAULT_MATRIX = "paper_v3"
RULES = CollapseRules()  # the dashboard's defaults


class ReportError(RuntimeError):
    """The store cannot give a report (it holds no paper numbers or no runs)."""


@dataclass(frozen=True)
class ReportData:
    """What the report shows, gathered from the store."""

    matrix: str
    db: str
    generated: datetime
    checker: str
    policy: str
    cells: int
    comparison: pd.DataFrame  # one row per paper cell of the matrix, with ``table`` and ``verdict``
    runs: pd.DataFrame  # the store's runs of the matrix's cells
    events: pd.DataFrame  # collapse events of those runs (run_id, rule, step, detail)
    curves: pd.DataFrame  # the metrics collapse detection read (run_id, step, metric, value, cap)
    unpaired: pd.DataFrame = field(default_factory=pd.DataFrame)  # cells of the matrix the paper gives no value
    released: pd.DataFrame = field(default_factory=pd.DataFrame)  # paper · released · reproduced (released_read)
    unaudited: pd.DataFrame = field(default_factory=pd.DataFrame)  # released checkpoints whose audit failed
    failed: pd.DataFrame = field(default_factory=pd.DataFrame)  # cells whose newest attempt failed (attempts.py)
    cost: pd.DataFrame = field(default_factory=pd.DataFrame)  # measured GPU-hours per method and model (ledger.py)
    cost_total: dict[str, str | float | int] = field(default_factory=dict)  # ledger.matrix_gpu_hours
    claims: list[ClaimResult] = field(default_factory=list)  # configs/claims.yaml on the store (claims.py)


def comparison_for(con: duckdb.DuckDBPyConnection, cells: Sequence[Cell], checker: str, policy: str) -> pd.DataFrame:
    """Every paper cell of the matrix (trained cells and their base models) beside its measured value.

    A cell the paper prints in several tables (the ablation table repeats Table 1 and 2) appears once, from the first.
    """
    frames = [paper_comparison(con, t, checker, policy).assign(table=t) for t in paper_tables(con)]
    frames = [f for f in frames if len(f)]
    if not frames:
        return pd.DataFrame()
    frame = pd.concat(frames, ignore_index=True)
    trained = {(c.method, c.base_model, c.dataset) for c in cells}
    bases = {(c.base_model, c.dataset) for c in cells}
    keep = [
        (m, b, d) in trained or (m == "base" and (b, d) in bases)
        for m, b, d in zip(frame["method"], frame["base_model"], frame["dataset"], strict=True)
    ]
    return frame[keep].drop_duplicates(["train_set", "model", "method", "benchmark"]).reset_index(drop=True)


def collect(
    con: duckdb.DuckDBPyConnection,
    matrix: str,
    cells: Sequence[Cell],
    db: str,
    checker: str = "math_verify",
    policy: str = "latest",
    rules: CollapseRules = RULES,
) -> ReportData:
    """Gather the report's tables from a read-only connection."""
    counts = con.execute(
        "SELECT (SELECT count(*) FROM paper_results), (SELECT count(*) FROM runs) + "
        "(SELECT count(*) FROM released_checkpoints)"
    ).fetchone()
    if not counts or not counts[0] or not counts[1]:
        raise ReportError(
            f"{db} is empty (no paper numbers, no runs and no audited released checkpoints): run "
            "`corewarding results ingest` first"
        )
    runs = con.execute(
        "SELECT run_id, cell_id, base_model, status, backend, last_step, total_steps FROM runs "
        "WHERE list_contains(?, cell_id) "
        "ORDER BY cell_id, run_id",
        [[c.cell_id for c in cells]],
    ).fetchdf()
    curves = collapse_inputs(con, runs["run_id"].tolist()) if len(runs) else pd.DataFrame()
    events = collapse_events(curves, rules) if len(curves) else pd.DataFrame(columns=["run_id", "rule"])
    failures = failed_cells(con, [c.cell_id for c in cells])
    comparison = _mark_failed(comparison_for(con, cells, checker, policy), set(failures["cell_id"]))
    unpaired = cells_without_paper_value(con, cells)
    unpaired.loc[unpaired["cell_id"].isin(failures["cell_id"]), "status"] = FAILED
    released = released_comparison(con, [c.cell_id for c in cells], checker)
    failed = unaudited(con, [c.cell_id for c in cells])
    cost = ledger.gpu_hours(con, ("method", "base_model"), [c.cell_id for c in cells])
    log.info(
        "report: %d paper cells, %d runs, %d collapse events, %d released scores",
        len(comparison), len(runs), len(events), len(released),
    )  # fmt: skip
    return ReportData(
        matrix,
        db,
        datetime.now(UTC),
        checker,
        policy,
        len(cells),
        comparison,
        runs,
        events,
        curves,
        unpaired,
        released,
        failed,
        failures,
        cost,
        ledger.matrix_gpu_hours(con, matrix),
        evaluate_claims(con, load_claims(config_dir() / "claims.yaml"), checker),
    )


def _mark_failed(comparison: pd.DataFrame, failed: set[str]) -> pd.DataFrame:
    """Rows of cells one of whose seeds' newest attempt failed: verdict FAILED, never compared (the value would hold
    an older run's)."""
    if not len(comparison) or not failed:
        return comparison
    groups = {_group_of(cell_id) for cell_id in failed}
    ids = [Cell(m, b, d).cell_id if m != "base" else "" for m, b, d in
           zip(comparison["method"], comparison["base_model"], comparison["dataset"], strict=True)]  # fmt: skip
    comparison.loc[pd.Series(ids, index=comparison.index).isin(groups), "verdict"] = FAILED
    return comparison


def _group_of(cell_id: str) -> str:
    """The seed-0 id a seed's cell id is grouped under (an id that is no cell's stands for itself)."""
    try:
        return parse_cell_id(cell_id).first_seed.cell_id
    except ValueError:
        return cell_id


def cells_without_paper_value(con: duckdb.DuckDBPyConnection, cells: Sequence[Cell]) -> pd.DataFrame:
    """The matrix's cells the reference CSV holds no value for (Co-rewarding-III's: the v3 paper reports them, but the
    CSV holds v2's numbers), with their newest run if any: listed as ``no paper value``, never compared or counted as
    outside an interval; a cell's seeds one after another."""
    printed = {
        tuple(r) for r in con.execute("SELECT DISTINCT method, base_model, dataset FROM paper_results").fetchall()
    }
    unprinted = [c for c in cells if (c.method, c.base_model, c.dataset) not in printed]
    first = {c.first_seed: i for i, c in reversed(list(enumerate(unprinted)))}
    ids = [c.cell_id for c in sorted(unprinted, key=lambda c: (first[c.first_seed], c.seed))]  # seeds together
    runs = runs_without_paper_value(con, ids).set_index("cell_id")
    run_ids = [str(runs.loc[c]["run_id"]) for c in ids if c in runs.index]
    measured, val = measured_headlines(con, run_ids), val_accuracy_span(con, run_ids)
    rows = []
    for cell_id in ids:
        run = runs.loc[cell_id] if cell_id in runs.index else None
        run_id = None if run is None else str(run["run_id"])
        cell = parse_cell_id(cell_id)
        rows.append({
            "cell_id": cell_id, "cell": cell.first_seed.cell_id, "seed": cell.seed,
            "status": "not run" if run is None else run["status"],
            "last_step": None if run is None or pd.isna(run["last_step"]) else int(run["last_step"]),
            "evaluated_steps": 0 if run is None else int(run["evaluated_steps"]),
            "val_accuracy": val.get(run_id or "", "–"),
            "measured": measured.get(run_id or "", "–"),
            "paper": NO_PAPER_VALUE,
            "run_id": run_id,
        })  # fmt: skip
    columns = ["cell_id", "cell", "seed", "status", "last_step", "evaluated_steps", "val_accuracy", "measured",
               "paper", "run_id"]  # fmt: skip
    return pd.DataFrame(rows, columns=columns)


def measured_headlines(con: duckdb.DuckDBPyConnection, run_ids: Sequence[str]) -> dict[str, str]:
    """Each run's headline at its newest evaluated step: the first benchmark's avg@k (else its first metric), by the
    math-verify checker, with its 95% bootstrap interval, e.g. ``tiny avg@4 @12 = 0.062 [0.000, 0.156]``."""
    if not run_ids:
        return {}
    rows = con.execute(
        f"""WITH latest AS (SELECT run_id, max(step) AS step FROM eval_metrics
                           WHERE step IS NOT NULL AND run_id IN (SELECT unnest(?)) GROUP BY run_id)
           SELECT e.run_id, {name_sql("e.benchmark")} AS bench, e.metric, e.step, e.value, e.ci_low, e.ci_high
           FROM eval_metrics e JOIN latest USING (run_id, step)
           WHERE e.checker = 'math_verify'
           ORDER BY e.run_id, bench, NOT starts_with(e.metric, 'avg@'), e.metric""",
        [list(run_ids)],
    ).fetchall()
    shown: dict[str, str] = {}
    for run_id, bench, metric, step, value, low, high in rows:
        interval = "" if low is None or high is None else f" [{low:.3f}, {high:.3f}]"
        shown.setdefault(run_id, f"{bench} {metric} @{step} = {value:.3f}{interval}")
    return shown


def val_accuracy_span(con: duckdb.DuckDBPyConnection, run_ids: Sequence[str]) -> dict[str, str]:
    """Each run's validation accuracy at its first logged step (step 0: the base model) and its last, as
    ``0.062 (step 0) -> 0.125 (step 12)``."""
    if not run_ids:
        return {}
    rows = con.execute(
        """SELECT run_id, min(step), arg_min(value, step), max(step), arg_max(value, step) FROM training_metrics
           WHERE metric = 'val_accuracy' AND value IS NOT NULL AND run_id IN (SELECT unnest(?)) GROUP BY run_id""",
        [list(run_ids)],
    ).fetchall()
    return {
        r[0]: f"{r[2]:.3f} (step {r[1]})" if r[1] == r[3] else f"{r[2]:.3f} (step {r[1]}) -> {r[4]:.3f} (step {r[3]})"
        for r in rows
    }


def stored_matrix(con: duckdb.DuckDBPyConnection) -> str:
    """The matrix the store's runs belong to (``matrix.matrix_of``); ``paper_v3`` for a store of other cells."""
    cell_ids = [r[0] for r in con.execute("SELECT DISTINCT cell_id FROM runs").fetchall()]
    return matrix_of(cell_ids) or DEFAULT_MATRIX
