"""The reproduction report's HTML: ``ReportData`` (``collect``) to one self-contained document.

Charts are hand-written SVG embedded as ``data:`` URIs (``plots``); the file has no scripts and fetches nothing when
opened. Every text that comes from the store is escaped. The claims, released and cost sections are ``claims``,
``released`` and ``cost``.
"""

from __future__ import annotations

from html import escape

import pandas as pd

from corewarding.results.cell_verdicts import INTERVAL_RULE, MEANINGS, OUTSIDE, UNDECIDED
from corewarding.results.ingest.attempts import failure_note
from corewarding.results.reference import V3_NOT_AVAILABLE
from corewarding.results.report import plots
from corewarding.results.report.claims import claims_section
from corewarding.results.report.collect import ReportData
from corewarding.results.report.cost import cost_section
from corewarding.results.report.markup import num as _num
from corewarding.results.report.markup import table as _table
from corewarding.results.report.released import released_section
from corewarding.tiny import PLUMBING_CHECK

MAX_LINES = 12  # runs drawn per collapse chart


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
