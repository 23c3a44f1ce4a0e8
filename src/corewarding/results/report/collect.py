"""The reproduction report: one self-contained HTML file of paper vs reproduced numbers, for a matrix.

It reads the store through a read-only connection and the same queries as the dashboard's paper page
(``corewarding.results.read``): per benchmark, each paper cell of the matrix beside the measured value, its bootstrap
interval and the difference; the cells whose paper value lies outside the measured interval; the audited released
checkpoints beside the paper and the reproduction (``report_released``); and the collapse events of the matrix's runs.
Charts are hand-written SVG embedded as ``data:`` URIs; the file has no scripts and fetches nothing when opened. Every
text that comes from the store is escaped.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from html import escape
from pathlib import Path

import duckdb
import pandas as pd

from corewarding.config import config_dir
from corewarding.matrix import Cell, load_matrix, matrix_of, parse_cell_id
from corewarding.results import ledger, plots
from corewarding.results.attempts import failed_cells, failure_note
from corewarding.results.cell_verdicts import INTERVAL_RULE, MEANINGS, OUTSIDE, UNDECIDED
from corewarding.results.claims import ClaimResult, evaluate_claims, load_claims
from corewarding.results.collapse import CollapseRules, collapse_events
from corewarding.results.names import name_sql
from corewarding.results.read import (
    NO_PAPER_VALUE,
    collapse_inputs,
    paper_comparison,
    paper_tables,
    runs_without_paper_value,
)
from corewarding.results.reference import V3_NOT_AVAILABLE
from corewarding.results.released_read import released_comparison, unaudited
from corewarding.results.report_claims import claims_section
from corewarding.results.report_cost import cost_section
from corewarding.results.report_html import num as _num
from corewarding.results.report_html import table as _table
from corewarding.results.report_released import released_section
from corewarding.results.store import reader
from corewarding.tiny import PLUMBING_CHECK

log = logging.getLogger(__name__)

FAILED = "FAILED (current config)"  # the cell's newest attempt failed: a stored value is not its result
MAX_LINES = 12  # runs drawn per collapse chart
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


def _ci(row: pd.Series) -> str:
    if pd.isna(row["ci_low"]) or pd.isna(row["ci_high"]):
        return "–"
    return f"[{row['ci_low']:.2f}, {row['ci_high']:.2f}]"


def _seeds(row: pd.Series) -> str:
    """How many seeds the value averages and what its interval holds, e.g. ``3 · seeds+problems``."""
    if pd.isna(row["measured"]):
        return "–"
    seeds = "base" if row["seeds"] == 0 else str(row["seeds"])
    return f"{escape(seeds)}<br><small>{escape(str(row['interval'] or 'no interval'))}</small>"


def _cell_rows(frame: pd.DataFrame, with_benchmark: bool) -> list[tuple[list[str], str]]:
    rows = []
    for _, r in frame.iterrows():
        cells = [escape(str(r["benchmark"]))] if with_benchmark else []
        cells += [escape(str(r[c])) for c in ("table", "train_set", "model", "method", "metric")]
        paper = _num(r["paper"]) + (" ⚠" if r["suspect"] is True else "")
        cells += [paper, _num(r["measured"]), _ci(r), _num(r["difference"]), _num(r["checkpoint_step"])]
        cells += [_seeds(r), escape(str(r["verdict"])), _num(r["run_id"])]
        rows.append((cells, "out" if r["verdict"] == OUTSIDE else ""))
    return rows


CELL_HEADERS = ["table", "train set", "model", "method", "metric", "paper", "measured", "95% CI", "Δ", "step"]
CELL_HEADERS += ["seeds · interval", "verdict", "run"]


def _flagged_section(comparison: pd.DataFrame) -> str:
    measured = int(comparison["measured"].notna().sum()) if len(comparison) else 0
    if not measured:  # nothing compared is no pass: say so instead of "no cell differs"
        return (
            "<h2>Cells outside their interval</h2><p><strong>Nothing was compared</strong>: no run in the store is "
            f"an evaluated cell of this matrix that the paper prints ({len(comparison)} paper cells, 0 measured).</p>"
        )
    flagged = comparison[comparison["verdict"] == OUTSIDE]
    if not len(flagged):
        return (
            "<h2>Cells outside their interval</h2><p>No measured cell differs from the paper beyond its interval.</p>"
        )
    flagged = flagged.reindex(flagged["difference"].abs().sort_values(ascending=False).index)
    return (
        f'<h2 id="flagged">Cells outside their interval ({len(flagged)})</h2>'
        "<p>The paper's value lies outside the cell's interval, one that holds seed variance (measured over the "
        "cell's seeds, or borrowed from cells of the same method, model family and size, named in the interval "
        "column) or a base model's; largest differences first.</p>"
        + _table(["benchmark", *CELL_HEADERS], _cell_rows(flagged, with_benchmark=True))
    )


def _benchmark_sections(comparison: pd.DataFrame) -> str:
    parts = []
    for bench, frame in comparison.groupby("benchmark", sort=False) if len(comparison) else []:
        measured = frame.dropna(subset=["measured"])
        points = [
            plots.Point(
                r.paper, r.measured, r.ci_low, r.ci_high, r.verdict == OUTSIDE, f"{r.model} {r.train_set} {r.method}"
            )
            for r in measured.itertuples()
        ]
        uri = plots.data_uri(plots.scatter(points, str(bench)))
        chart = f'<img alt="{escape(str(bench))}: measured vs paper" src="{uri}">'
        out, undecided = int((frame["verdict"] == OUTSIDE).sum()), int((frame["verdict"] == UNDECIDED).sum())
        parts.append(
            f'<section class="benchmark"><h3>{escape(str(bench))}</h3>'
            f"<p>{len(measured)} of {len(frame)} cells measured, {out} outside their interval, {undecided} "
            "undecided at one seed.</p>"
            + (chart if points else "")
            + _table(CELL_HEADERS, _cell_rows(frame, with_benchmark=False))
            + "</section>"
        )
    return "<h2>By benchmark</h2>" + ("".join(parts) or "<p>No paper cell belongs to this matrix.</p>")


UNPAIRED_HEADERS = ["cell", "seed", "status", "last step", "evaluated steps", "val acc (first -> last step)"]
UNPAIRED_HEADERS += ["measured (newest step, 95% CI)", "paper", "run"]


def _unpaired_section(unpaired: pd.DataFrame) -> str:
    """The matrix's cells without a paper value here (e.g. Co-rewarding-III's, whose v3 values the reference CSV
    lacks): their measured scores, not compared."""
    if not len(unpaired):
        return ""
    rows = [
        ([escape(str(r.cell)), _num(r.seed), escape(str(r.status)), _num(r.last_step), _num(r.evaluated_steps),
          escape(str(r.val_accuracy)), escape(str(r.measured)), escape(str(r.paper)), _num(r.run_id)], "")
        for r in unpaired.itertuples()
    ]  # fmt: skip
    return (
        f'<h2 id="no-paper-value">Cells without a paper value ({len(unpaired)})</h2>'
        f"<p>No paper value is available here for these cells: {escape(V3_NOT_AVAILABLE)}, and cells added here "
        "have none. Their measured scores are shown, not compared, and never counted as outside an interval.</p>"
        + _table(UNPAIRED_HEADERS, rows)
    )


def _failed_section(failed: pd.DataFrame) -> str:
    """The matrix's cells whose newest pipeline attempt failed: why, and what the run the store holds is from."""
    if not len(failed):
        return ""
    rows = [([escape(str(r["cell_id"])), escape(failure_note(r))], "out") for r in failed.to_dict("records")]
    return (
        f'<h2 id="failed">Cells whose newest attempt failed ({len(failed)})</h2>'
        "<p>FAILED for the config that attempt ran; a value shown for them elsewhere is from the run the store holds, "
        "labelled below with the config it is from, and is never compared.</p>" + _table(["cell", "failure"], rows)
    )


def _collapse_charts(data: ReportData) -> list[str]:
    """One chart per method: validation accuracy of its runs that collapsed, event steps marked."""
    hit = data.runs[data.runs["run_id"].isin(data.events["run_id"])]
    val = data.curves[data.curves["metric"] == "val_accuracy"] if len(data.curves) else data.curves
    charts = []
    for method, group in hit.groupby(hit["cell_id"].str.split("__").str[0], sort=True):
        ids = group["run_id"].tolist()[:MAX_LINES]
        series = {
            i: (s["step"].tolist(), s["value"].tolist())
            for i, s in val[val["run_id"].isin(ids)].sort_values("step").groupby("run_id")
        }
        if not series:
            continue
        marks = data.events[data.events["run_id"].isin(ids)].groupby("run_id")["step"].apply(list).to_dict()
        title = f"{method}: val_accuracy" + (
            f" (first {MAX_LINES} of {len(group)} runs)" if len(group) > MAX_LINES else ""
        )
        svg = plots.lines(series, marks, title, y_label="val_accuracy")
        charts.append(f'<img alt="{escape(title)}" src="{plots.data_uri(svg)}">')
    return charts


def _collapse_section(data: ReportData) -> str:
    if not len(data.events):
        return "<h2>Collapse events</h2><p>No run of this matrix shows a collapse signature.</p>"
    status = dict(zip(data.runs["run_id"], data.runs["status"], strict=True))
    rows = [
        ([escape(str(e.run_id)), escape(str(status.get(e.run_id, ""))), escape(str(e.rule)), str(e.step),
          escape(str(e.detail))], "")
        for e in data.events.itertuples()
    ]  # fmt: skip
    runs = data.events["run_id"].nunique()
    return (
        f'<h2 id="collapse">Collapse events ({len(data.events)} in {runs} run(s))</h2>'
        "<p>val_drop: validation accuracy fell more than a margin below its peak; reward_without_labels: reward near "
        "1 while pseudo-label accuracy fell; length_at_cap: mean response length pinned at the cap. Dashed lines mark "
        "the first step of each event.</p>"
        + "".join(_collapse_charts(data))
        + _table(["run", "status", "rule", "step", "detail"], rows)
    )


STYLE = """body{font-family:sans-serif;margin:2em;color:#222}table{border-collapse:collapse;margin:.5em 0 1.5em;
font-size:12px}th,td{border:1px solid #ccc;padding:2px 6px;text-align:left}th{background:#f3f3f3}
tr.out td{background:#fde2e1}.warn{background:#fff4ce;padding:.5em;border:1px solid #e0c060}img{margin:.3em}
dl{display:grid;grid-template-columns:max-content auto;gap:2px 12px}dt{font-weight:bold}"""


def _header(data: ReportData) -> str:
    comparison = data.comparison
    measured = int(comparison["measured"].notna().sum()) if len(comparison) else 0
    outside = int((comparison["verdict"] == OUTSIDE).sum()) if len(comparison) else 0
    undecided = int((comparison["verdict"] == UNDECIDED).sum()) if len(comparison) else 0
    synthetic = int((data.runs["backend"] == "synthetic").sum())
    facts = {
        "measured": f"{measured} of {len(comparison)} paper cells of the matrix",
        "matrix": f"{data.matrix} ({data.cells} cells)",
        "store": data.db,
        "generated": data.generated.strftime("%Y-%m-%d %H:%M:%S UTC"),
        "checker / checkpoint": f"{data.checker} / {data.policy}",
        "runs of the matrix in the store": f"{len(data.runs)} ({data.runs['cell_id'].nunique()} cells)",
        "paper cells": f"{len(comparison)}, {measured} measured, {outside} outside their interval, {undecided} "
        "undecided at one seed",
        "cells without a paper value": str(len(data.unpaired)),
        "collapse events": f"{len(data.events)} in {data.events['run_id'].nunique()} run(s)",
    }
    facts_html = "".join(f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in facts.items())
    warn = (
        f'<p class="warn">{synthetic} run(s) are synthetic (`corewarding results synthetic`): not results.</p>'
        if synthetic
        else ""
    )
    tiny = len(data.runs) and bool((data.runs["base_model"] == "tiny").all())
    plumbing = f'<p class="warn">{escape(PLUMBING_CHECK)}</p>' if tiny else ""
    note = plumbing + (
        "<p>Values are percent (pass@1; AMC avg@8); a trained cell's value is the mean over its seeds. "
        + escape(INTERVAL_RULE)
        + " Verdicts: "
        + "; ".join(f"<em>{escape(v)}</em>: {escape(m)}" for v, m in MEANINGS.items())
        + ". ⚠ marks paper cells that disagree with the paper's own sub-metric tables.</p>"
    )
    return f"<h1>Reproduction report: matrix {escape(data.matrix)}</h1><dl>{facts_html}</dl>{warn}{note}"


def render(data: ReportData) -> str:
    """The report as one HTML document (inline style, images as data: URIs, no scripts)."""
    body = _header(data) + claims_section(data.claims) + _failed_section(data.failed)
    body += _flagged_section(data.comparison) + _benchmark_sections(data.comparison)
    body += _unpaired_section(data.unpaired)
    body += released_section(data.released, data.unaudited)
    body += _collapse_section(data)
    body += cost_section(data.cost, data.cost_total)
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>Reproduction report: {escape(data.matrix)}</title><style>{STYLE}</style></head>"
        f"<body>{body}</body></html>\n"
    )


def stored_matrix(con: duckdb.DuckDBPyConnection) -> str:
    """The matrix the store's runs belong to (``matrix.matrix_of``); ``paper_v3`` for a store of other cells."""
    cell_ids = [r[0] for r in con.execute("SELECT DISTINCT cell_id FROM runs").fetchall()]
    return matrix_of(cell_ids) or DEFAULT_MATRIX


def build_report(
    db: str | Path, matrix: str | None = None, checker: str = "math_verify", policy: str = "latest"
) -> str:
    """Open the store read-only and return the report of ``matrix`` (None: the matrix the store's runs belong to)
    as an HTML string."""
    with reader(db, check=True) as con:  # every block read once: a damaged store stops here, not half-way
        name = matrix or stored_matrix(con)
        return render(collect(con, name, load_matrix(name).cells, str(db), checker, policy))


def report_matrix(db: str | Path) -> str:
    """The matrix ``build_report`` covers by default for the store ``db``."""
    with reader(db) as con:
        return stored_matrix(con)
