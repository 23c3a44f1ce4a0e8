"""Paper · released · reproduced: each audited released checkpoint's score beside the paper's value and the newest
reproduction of its cell, with two verdicts and the settings that differ (shared by the dashboard and the report).

Pure functions of a read-only DuckDB connection and plain values; every value reaches SQL as a bound parameter.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import duckdb
import pandas as pd

from corewarding.results import cell_verdicts
from corewarding.results.names import key_sql, name_sql
from corewarding.results.reference import V3_NOT_AVAILABLE
from corewarding.results.seed_variance import PROBLEMS_ONLY, Interval, Lent, one_seed_interval
from corewarding.settings_diff import differing_settings, settings_dict

Con = duckdb.DuckDBPyConnection

# What ci_low / ci_high are: the evaluation's bootstrap over problems at its configured confidence (default 0.95);
# the reproduced side's t interval over seeds, as on the paper page (``cell_verdicts``).
INTERVAL = (
    "released: the audit's 95% percentile bootstrap interval over problems; reproduced: the mean over the cell's "
    "seeds, its t interval over seeds that holds seed and problem variance (one seed: widened by borrowed seed "
    "variance)"
)
# paper_vs_released
WITHIN_RELEASED, OUTSIDE_RELEASED, NO_CI, NO_PAPER_VALUE = (
    "within released CI",
    "outside released CI",
    "no CI",
    "no paper value",
)
# released_vs_reproduced
OVERLAP, DISJOINT, NOT_REPRODUCED = "CIs overlap", "CIs disjoint", "not reproduced"
UNDECIDED_RELEASED = cell_verdicts.UNDECIDED  # either verdict, when only problem variance is known
VERDICTS = {
    WITHIN_RELEASED: "the paper's value lies inside the released checkpoint's interval",
    OUTSIDE_RELEASED: "the paper's value lies outside the released checkpoint's interval, widened by the seed "
    "variance of reproduced cells of the same method, model family and size (a released checkpoint is one training "
    "run)",
    OVERLAP: "the released and the reproduced intervals share at least one value",
    DISJOINT: "the released and the reproduced intervals share no value, both holding seed variance",
    UNDECIDED_RELEASED: "outside or disjoint on problem variance alone: no reproduced cell of the method, model "
    "family and size has two seeds to borrow a seed variance from",
    NO_CI: "a side has no interval, so no verdict",
    NOT_REPRODUCED: "no run of the cell is evaluated on this benchmark and metric",
    NO_PAPER_VALUE: f"the reference CSV holds no number for this cell and benchmark; {V3_NOT_AVAILABLE}",
}

# Benchmarks matched by ``names.key_sql`` and shown by ``names.name_sql``, whatever spelling a row was stored under
_SQL = f"""
WITH released AS (
    SELECT c.cell_id, c.method, c.base_model, c.dataset, c.revision, {name_sql("e.benchmark")} AS benchmark,
           {key_sql("e.benchmark")} AS benchmark_key, e.metric, e.value, e.ci_low, e.ci_high, e.settings,
           e.settings_key
    FROM eval_metrics e JOIN released_checkpoints c USING (run_id)
    WHERE e.source = 'released' AND e.checker = $checker AND ($all_cells OR list_contains($cells, c.cell_id))
    QUALIFY row_number() OVER (PARTITION BY e.run_id, {key_sql("e.benchmark")}, e.metric, e.settings_key
        ORDER BY e.step DESC NULLS FIRST) = 1),
numbered AS (SELECT *, row_number() OVER (ORDER BY cell_id, benchmark, metric, settings_key) AS ord FROM released),
paper AS (
    SELECT method, base_model, dataset, {key_sql("benchmark")} AS benchmark_key, metric, value FROM paper_results
    QUALIFY row_number() OVER (PARTITION BY method, base_model, dataset, {key_sql("benchmark")}, metric
        ORDER BY value IS NULL, table_name) = 1),
reproduced AS (
    SELECT n.ord, s.seed_index, r.run_id, e.step, e.benchmark, e.value, e.ci_low, e.ci_high, e.settings,
           e.settings_key
    FROM numbered n JOIN run_seeds s ON s.cell_group = n.cell_id JOIN runs r ON r.run_id = s.run_id
    JOIN eval_metrics e ON e.run_id = r.run_id AND e.checker = $checker AND {key_sql("e.benchmark")} = n.benchmark_key
        AND e.metric = n.metric AND e.step IS NOT NULL
    QUALIFY row_number() OVER (PARTITION BY n.ord, r.cell_id ORDER BY r.started_at DESC NULLS LAST, r.run_id,
        e.step DESC, e.settings_key IS NOT DISTINCT FROM n.settings_key DESC, e.settings_key) = 1)
SELECT n.ord, n.cell_id, n.method, n.base_model, n.dataset, n.benchmark, n.benchmark_key, n.metric, p.value AS paper,
       round(n.value * 100, 2) AS released, round(n.ci_low * 100, 2) AS released_ci_low,
       round(n.ci_high * 100, 2) AS released_ci_high, n.revision AS released_revision,
       n.settings AS released_settings, n.settings_key AS released_settings_key,
       round(m.value * 100, 2) AS reproduced, round(m.ci_low * 100, 2) AS reproduced_ci_low,
       round(m.ci_high * 100, 2) AS reproduced_ci_high, m.step AS reproduced_step, m.run_id,
       m.settings AS reproduced_settings, m.settings_key AS reproduced_settings_key,
       m.value AS seed_value, m.ci_low AS seed_ci_low, m.ci_high AS seed_ci_high, m.benchmark AS seed_benchmark
FROM numbered n
LEFT JOIN paper p ON p.method = n.method AND p.base_model = n.base_model AND p.dataset = n.dataset
    AND p.benchmark_key = n.benchmark_key AND p.metric = n.metric
LEFT JOIN reproduced m USING (ord)
ORDER BY n.ord, m.seed_index
"""


def released_comparison(con: Con, cell_ids: Sequence[str] | None, checker: str) -> pd.DataFrame:
    """One row per released score under ``checker`` (cell, benchmark, metric, settings key) of ``cell_ids`` (None:
    every audited cell), in percent, beside the paper's value and the newest reproduction of the cell.

    The reproduction is the mean over the cell's seeds of each seed's newest run (``started_at``) evaluated on that
    benchmark and metric, at its latest evaluated step (a same-settings row first where a step has several), with
    the seed-aware interval of ``cell_verdicts``; ``run_id``, step and settings are the first seed's. The verdicts
    follow ``seed_variance``'s rule: a released checkpoint is one training run, so its interval is widened by the
    seed variance borrowed from reproduced cells of the method, model family and size (``released_interval`` says
    which), and
    intervals of problem variance alone never give ``outside`` or ``disjoint``; ``released_wide_low`` and
    ``released_wide_high`` are the widened interval the verdicts use. Released rows of one benchmark
    under several settings keys (two seeds) are separate scores, never averaged. ``settings_differ`` names the
    settings that differ from the reproduction, or else from the cell's other released rows of that benchmark;
    ``settings unknown`` when a side was stored without them.
    """
    seeds = con.execute(
        _SQL, {"checker": checker, "all_cells": cell_ids is None, "cells": list(cell_ids or [])}
    ).fetchdf()
    pooled = cell_verdicts.pooled_variances(cell_verdicts.seed_scores(con, checker, "latest"))
    rows = [_over_seeds(con, group, pooled, checker) for _, group in seeds.groupby("ord", sort=True)]
    frame = pd.DataFrame(rows, columns=[*seeds.columns.drop(SEED_COLUMNS), *ADDED]).drop(columns=["ord"])
    frame["reproduced_step"] = frame["reproduced_step"].astype("Int64")
    frame["reproduced_seeds"] = frame["reproduced_seeds"].astype("Int64")
    frame["settings_differ"] = _settings_differ(frame)
    # on the rounded percent shown (as paper_comparison rounds), so a verdict never contradicts the printed numbers
    frame["paper_vs_released"] = [_paper_verdict(r) for r in frame.itertuples()]
    frame["released_vs_reproduced"] = [_reproduced_verdict(r) for r in frame.itertuples()]
    return frame


SEED_COLUMNS = ["seed_value", "seed_ci_low", "seed_ci_high", "seed_benchmark"]
ADDED = ["reproduced_seeds", "released_interval", "reproduced_interval", "released_wide_low", "released_wide_high"]


def _over_seeds(con: Con, group: pd.DataFrame, pooled: cell_verdicts.Pooled, checker: str) -> dict[str, Any]:
    """One released row with its cell's reproduction over seeds: the mean of the seeds' values, the seed-aware
    interval (percent), and the released interval widened by the seed variance its cell would borrow."""
    first = group.iloc[0]
    row = first.drop(SEED_COLUMNS).to_dict()
    key = (first["method"], first["base_model"], first["dataset"], first["benchmark_key"], first["metric"])
    borrowed = cell_verdicts.borrowed_for(pooled, key)
    released = _released_interval(first, borrowed)
    row.update(released_interval=released.source if released else None, reproduced_seeds=0,
               reproduced_interval=None, released_wide_low=released.low if released else None,
               released_wide_high=released.high if released else None)  # fmt: skip
    measured = group.dropna(subset=["seed_value"])
    if not len(measured):
        return row
    seeds = measured.rename(columns={"seed_value": "value", "seed_ci_low": "ci_low", "seed_ci_high": "ci_high",
                                     "seed_benchmark": "benchmark", "reproduced_step": "step"})  # fmt: skip
    interval = cell_verdicts.in_percent(cell_verdicts.cell_interval(seeds, borrowed))
    shown = interval.source if interval else None
    row.update(reproduced=round(float(measured["seed_value"].mean()) * 100, 2), reproduced_seeds=len(measured),
               reproduced_ci_low=interval.low if interval else None, reproduced_interval=shown,
               reproduced_ci_high=interval.high if interval else None)  # fmt: skip
    return row


def _released_interval(row: pd.Series, borrowed: Lent | None) -> Interval | None:
    """A released checkpoint's interval in percent: one training run's problem interval, widened by the seed variance
    its cell borrows (``seed_variance.one_seed_interval``), or alone and labelled so."""
    if pd.isna(row["released_ci_low"]) or pd.isna(row["released_ci_high"]):
        return None
    wide = one_seed_interval(float(row["released"]), float(row["released_ci_low"]), float(row["released_ci_high"]),
                             None if borrowed is None else borrowed.scaled(100))  # fmt: skip
    return Interval(wide.estimate, round(wide.low, 2), round(wide.high, 2), 1, wide.source)


def settings_flag(differ: object) -> str:
    """The flag of a row whose comparison crosses settings, else ''. The ``seed`` of a score's settings is the
    evaluation's sampling seed, and the flag says so: an audit's second seed re-samples the same checkpoint, it is
    no second training run (those are a matrix's ``seeds``).

    >>> settings_flag("seed"), settings_flag("temperature, seed"), settings_flag("")
    ('⚠ settings differ: seed (evaluation)', '⚠ settings differ: temperature, seed (evaluation)', '')
    """
    if not isinstance(differ, str) or not differ:
        return ""
    named = [f"{name} (evaluation)" if name == "seed" else name for name in differ.split(", ")]
    return f"⚠ settings differ: {', '.join(named)}"


def _paper_verdict(row: Any) -> str:
    """The paper's value against the released interval, widened by borrowed seed variance (``seed_variance``'s
    rule: outside an interval of problem variance alone is undecided)."""
    if pd.isna(row.paper):
        return NO_PAPER_VALUE
    if pd.isna(row.released_wide_low) or pd.isna(row.released_wide_high):
        return NO_CI
    if row.released_wide_low <= row.paper <= row.released_wide_high:
        return WITHIN_RELEASED
    return UNDECIDED_RELEASED if row.released_interval == PROBLEMS_ONLY else OUTSIDE_RELEASED


def _reproduced_verdict(row: Any) -> str:
    """Whether the released and the reproduced intervals (each holding seed variance where known) overlap; disjoint
    intervals of problem variance alone are undecided."""
    if pd.isna(row.reproduced):
        return NOT_REPRODUCED
    bounds = (row.released_wide_low, row.released_wide_high, row.reproduced_ci_low, row.reproduced_ci_high)
    if any(pd.isna(b) for b in bounds):
        return NO_CI
    low, high, other_low, other_high = bounds
    if low <= other_high and other_low <= high:
        return OVERLAP
    return UNDECIDED_RELEASED if PROBLEMS_ONLY in (row.released_interval, row.reproduced_interval) else DISJOINT


def _settings_differ(frame: pd.DataFrame) -> list[str]:
    """Per row: what differs from the reproduction; when nothing does (or nothing was reproduced), what differs from
    the other released rows of the same cell, benchmark and metric, so a comparison across settings is never silent."""
    out = pd.Series("", index=frame.index, dtype=object)
    for _, group in frame.groupby(["cell_id", "benchmark", "metric"], sort=False):
        for index, row in group.iterrows():
            names = (
                differing_settings(row["released_settings"], row["reproduced_settings"])
                if pd.notna(row["reproduced"])
                else []
            )
            if not names:
                others = group["released_settings"].drop(index)
                names = sorted(
                    {name for other in others for name in differing_settings(row["released_settings"], other)}
                )
            out[index] = ", ".join(names)
    return out.tolist()


PROMPT_CHARS = 60  # a prompt listed with the settings is cut to this many characters
NOT_RECORDED = "not recorded"
PLAIN = ("tensor_parallel_size", "dtype", "batch_size", "temperature", "top_p", "n", "max_new_tokens", "seed")
SHOWN = ("backend", *PLAIN, "chat template", "prompt", "checker", "benchmark sha256")


def shown_settings(settings: dict[str, Any] | None) -> dict[str, Any]:
    """The settings as the report and the dashboard list them, under ``SHOWN``'s labels (None: not recorded).

    >>> shown_settings({"generation_backend": "vllm", "generation_version": "0.10.1", "seed": 1})["backend"]
    'vllm 0.10.1'
    """
    s = settings or {}
    return {
        "backend": _joined(s, "generation_backend", "generation_version"),
        **{name: s.get(name) for name in PLAIN},
        "chat template": s.get("chat_template_sha256"),
        "prompt": _cut(s.get("prompt"), PROMPT_CHARS),
        "checker": _joined(s, "checker_tool", "checker_version"),
        "benchmark sha256": _cut(s.get("benchmark_sha256"), 16),
    }


def _joined(settings: dict[str, Any], *names: str) -> str | None:
    return " ".join(str(settings[n]) for n in names if settings.get(n) is not None) or None


def _cut(text: object, chars: int) -> str | None:
    if text is None:
        return None
    flat = str(text).replace("\n", " ")
    return flat if len(flat) <= chars else flat[:chars] + "…"


def settings_listing(frame: pd.DataFrame) -> pd.DataFrame:
    """The settings of each distinct settings key shown in the released and the reproduced column of a
    ``released_comparison`` frame: one row per (column, settings_key), its settings under ``SHOWN``'s labels
    (``not recorded`` as the key of rows stored without settings)."""
    rows = []
    for column in ("released", "reproduced"):
        shown = frame[frame[column].notna()].drop_duplicates(f"{column}_settings_key")
        for _, row in shown.iterrows():
            key = row[f"{column}_settings_key"]
            rows.append({
                "column": column,
                "settings_key": key if isinstance(key, str) else NOT_RECORDED,
                **shown_settings(settings_dict(row[f"{column}_settings"])),
            })  # fmt: skip
    return pd.DataFrame(rows, columns=["column", "settings_key", *SHOWN], dtype=object)  # ints stay ints


def unaudited(con: Con, cell_ids: Sequence[str] | None) -> pd.DataFrame:
    """The released checkpoints whose last audit failed (a gated repo, a missing revision, no network), with why."""
    return con.execute(
        """SELECT cell_id, hub_repo_id, revision, error, audited_at FROM released_checkpoints
        WHERE status = 'failed' AND (? OR list_contains(?, cell_id)) ORDER BY cell_id""",
        [cell_ids is None, list(cell_ids or [])],
    ).fetchdf()
