"""The report's section on the paper's released checkpoints: paper · released · reproduced for the matrix's cells
(``released_read.released_comparison``), the two verdicts, a flag where settings differ, and the settings per column.
Every text from the store is escaped."""

from __future__ import annotations

from html import escape

import pandas as pd

from corewarding.results.released_read import (
    DISJOINT,
    INTERVAL,
    OUTSIDE_RELEASED,
    SHOWN,
    VERDICTS,
    settings_flag,
    settings_listing,
)
from corewarding.results.report.markup import num, table
from corewarding.results.seed_variance import BORROWED

TITLE = "Released checkpoints: paper · released · reproduced"
AUDIT_HINT = "corewarding audit --matrix paper_v3"
HEADERS = ["cell", "benchmark", "metric", "paper", "released [CI]", "reproduced [CI]", "paper vs released"]
HEADERS += ["released vs reproduced", "settings"]


def _score(row: pd.Series, side: str) -> str:
    """A value with its interval, and under it the settings key (and step) naming its column of settings, and what
    the interval holds (with the reproduction's seeds)."""
    if pd.isna(row[side]):
        return "–"
    low, high = row[f"{side}_ci_low"], row[f"{side}_ci_high"]
    interval = f" [{num(low)}, {num(high)}]" if pd.notna(low) and pd.notna(high) else " [no CI]"
    key = row[f"{side}_settings_key"]
    notes = [f"step {num(row['reproduced_step'])}"] if side == "reproduced" else []
    notes.append(f"settings {num(key) if isinstance(key, str) else 'not recorded'}")
    holds = row[f"{side}_interval"]
    if side == "reproduced":
        notes.append(f"{num(row['reproduced_seeds'])} seed(s), {num(holds) if isinstance(holds, str) else 'no CI'}")
    elif holds == BORROWED:
        notes.append(f"with borrowed seed variance [{num(row['released_wide_low'])}, {num(row['released_wide_high'])}]")
    elif isinstance(holds, str):
        notes.append(f"{num(holds)}: no seed variance to borrow")
    return f"{num(row[side])}{interval}<br><small>{' · '.join(notes)}</small>"


def _rows(frame: pd.DataFrame) -> list[tuple[list[str], str]]:
    rows = []
    for _, r in frame.iterrows():
        cells = [num(r["cell_id"]), num(r["benchmark"]), num(r["metric"]), num(r["paper"])]
        cells += [_score(r, "released"), _score(r, "reproduced")]
        cells += [
            num(r["paper_vs_released"]),
            num(r["released_vs_reproduced"]),
            escape(settings_flag(r["settings_differ"])),
        ]
        off = r["paper_vs_released"] == OUTSIDE_RELEASED or r["released_vs_reproduced"] == DISJOINT
        rows.append((cells, "out" if off else ""))
    return rows


def _settings_table(frame: pd.DataFrame) -> str:
    """One column per settings key shown (released ones first), one row per setting."""
    listing = settings_listing(frame)
    headers = ["setting", *(f"{c} · {k}" for c, k in zip(listing["column"], listing["settings_key"], strict=True))]
    rows = [([escape(label), *(num(v) for v in listing[label])], "") for label in SHOWN]
    return table(headers, rows)


def failed_audits(failed: pd.DataFrame | None) -> str:
    """A paragraph naming the released checkpoints whose last audit failed, with why ('' when none)."""
    if failed is None or not len(failed):
        return ""
    items = "".join(
        f"<li><code>{escape(str(r.cell_id))}</code> ({escape(str(r.hub_repo_id))}): {escape(str(r.error))}</li>"
        for r in failed.itertuples()
    )
    return (
        f"<p>{len(failed)} released checkpoint(s) could not be audited (their last audit failed):</p><ul>{items}</ul>"
    )


def released_section(frame: pd.DataFrame, failed: pd.DataFrame | None = None) -> str:
    """The section for a ``released_comparison`` frame of the matrix's cells and the checkpoints whose audit failed;
    without rows, how to get them."""
    head = f'<h2 id="released">{escape(TITLE)}</h2>' + failed_audits(failed)
    if not len(frame):
        return (
            f"{head}<p>No released checkpoint of this matrix is audited in the store: run <code>{AUDIT_HINT}</code>, "
            "then <code>corewarding results ingest</code>.</p>"
        )
    meanings = "; ".join(f"<em>{escape(v)}</em>: {escape(m)}" for v, m in VERDICTS.items())
    return (
        f"{head}<p>Each score of a Hub checkpoint the paper released, beside the paper's value and the newest "
        "reproduction of its cell (its latest evaluated step), in percent. Intervals are the evaluation's "
        f"{escape(INTERVAL)}. Under each value: what its interval holds; the verdicts widen the released interval by "
        "the same borrowed seed variance. A released checkpoint scored under several settings (two evaluation seeds: "
        "one training run re-sampled) has a row "
        f"per setting, never averaged; ⚠ names the settings a comparison crosses. {meanings}.</p>"
        + table(HEADERS, _rows(frame))
        + "<h3>Settings per column</h3><p>The settings each score above was produced with, by its settings key "
        "(the model revision is not compared).</p>" + _settings_table(frame)
    )
