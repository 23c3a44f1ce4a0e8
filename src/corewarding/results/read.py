"""Read queries shared by the dashboard and the reproduction report: paper vs measured, and collapse inputs.

Pure functions of a read-only DuckDB connection and plain values; every value reaches SQL as a bound parameter.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import duckdb
import pandas as pd

from corewarding.results import cell_verdicts
from corewarding.results.collapse import METRICS as COLLAPSE_METRICS
from corewarding.results.names import key_sql, name_sql

Con = duckdb.DuckDBPyConnection


def paper_tables(con: Con) -> list[str]:
    """The paper tables in the store, sorted."""
    return [r[0] for r in con.execute("SELECT DISTINCT table_name FROM paper_results ORDER BY 1").fetchall()]


# Each paper cell of a table, with the base-model evaluation (step null) of a run of that model for its base rows
# (benchmarks matched by ``names.key_sql``, whatever spelling a row was stored under)
_PAPER_SQL = f"""
WITH ref AS (SELECT *, rowid AS ord, {key_sql("benchmark")} AS bkey FROM paper_results WHERE table_name = $table),
base AS (
    SELECT ref.ord, e.run_id, e.value, e.ci_low, e.ci_high, e.n, e.num_problems
    FROM ref JOIN runs r ON ref.method = 'base' AND r.base_model = ref.base_model
        JOIN eval_metrics e ON e.run_id = r.run_id AND e.checker = $checker AND e.step IS NULL
            AND {key_sql("e.benchmark")} = ref.bkey AND e.metric = ref.metric
    QUALIFY row_number() OVER (PARTITION BY ref.ord ORDER BY (r.dataset = ref.dataset) DESC,
        r.started_at DESC NULLS LAST, r.run_id) = 1)
SELECT ref.train_set, ref.model, ref.method, ref.base_model, ref.dataset, {name_sql("ref.benchmark")} AS benchmark,
       ref.bkey AS benchmark_key, ref.metric, ref.value AS paper, ref.suspect, b.run_id AS base_run_id,
       b.value AS base_value, b.ci_low AS base_ci_low, b.ci_high AS base_ci_high, b.n AS base_n,
       b.num_problems AS base_num_problems
FROM ref LEFT JOIN base b USING (ord) ORDER BY ref.ord
"""
COLUMNS = [
    "train_set", "model", "method", "benchmark", "metric", "paper", "measured", "difference", "checkpoint_step",
    "ci_low", "ci_high", "seeds", "interval", "verdict", "n", "num_problems", "suspect", "run_id", "seed_runs",
    "base_model", "dataset",
]  # fmt: skip


def _pct(value: float | None) -> float | None:
    return None if value is None or pd.isna(value) else round(float(value) * 100, 2)


def _trained(
    con: Con, rows: pd.DataFrame | None, key: cell_verdicts.PolicyKey, pooled: cell_verdicts.Pooled, checker: str
) -> dict[str, Any]:
    """The measurement of one trained cell over its seeds (``rows``: one per seed), with its interval."""
    if rows is None or not len(rows):
        return {"seeds": 0}
    interval = cell_verdicts.cell_interval(rows, cell_verdicts.borrowed_for(pooled, key))
    first = rows.iloc[0]
    return {
        "measured": float(rows["value"].mean()), "interval_": interval, "seeds": len(rows),
        "checkpoint_step": cell_verdicts.steps_text(rows["step"].tolist()), "n": first["n"],
        "num_problems": first["num_problems"], "run_id": first["run_id"], "seed_runs": ", ".join(rows["run_id"]),
    }  # fmt: skip


def _base(row: pd.Series) -> dict[str, Any]:
    """A base row's measurement: the base-model evaluation, its problem interval decisive."""
    if pd.isna(row["base_value"]):
        return {"seeds": 0}
    interval = cell_verdicts.base_interval(float(row["base_value"]), row["base_ci_low"], row["base_ci_high"])
    return {
        "measured": float(row["base_value"]), "interval_": interval, "seeds": 0, "checkpoint_step": "base model",
        "n": row["base_n"], "num_problems": row["base_num_problems"], "run_id": row["base_run_id"],
    }  # fmt: skip


def paper_comparison(con: Con, table: str, checker: str, policy: str = "latest") -> pd.DataFrame:
    """Each cell of a paper table beside its measured value (percent): the mean over the cell's seeds of each seed's
    newest run, at the checkpoint ``policy`` picks (``latest``: the last evaluated step; ``best``: the step with the
    highest value), with the seed-aware interval and verdict of ``cell_verdicts`` (``interval`` says what the interval
    holds). Base rows use the base-model evaluation (step null) of a run of that model.
    """
    seeds = cell_verdicts.seed_scores(con, checker, policy)  # checks the policy
    pooled = cell_verdicts.pooled_variances(seeds)
    ref = con.execute(_PAPER_SQL, {"table": table, "checker": checker}).fetchdf()
    by_key = cell_verdicts.seeds_by_key(seeds, ref)
    out = []
    for _, row in ref.iterrows():
        key = (row["method"], row["base_model"], row["dataset"], row["benchmark_key"], row["metric"])
        found = _base(row) if row["method"] == "base" else _trained(con, by_key.get(key), key, pooled, checker)
        interval = found.pop("interval_", None)
        paper = None if pd.isna(row["paper"]) else float(row["paper"])
        measured = _pct(found.pop("measured", None))
        # in the rounded percent shown, so a verdict never contradicts the printed numbers
        shown = cell_verdicts.in_percent(interval)
        out.append({
            **row.to_dict(), **found, "measured": measured,
            "difference": None if measured is None or paper is None else round(measured - paper, 2),
            "ci_low": shown.low if shown else None, "ci_high": shown.high if shown else None,
            "interval": shown.label if shown else None,
            "verdict": cell_verdicts.verdict_of(paper, measured, shown),
        })  # fmt: skip
    frame = pd.DataFrame(out, columns=COLUMNS)
    frame["seeds"] = frame["seeds"].astype("Int64")
    return frame


NO_PAPER_VALUE = "no paper value"


def runs_without_paper_value(con: Con, cell_ids: Sequence[str] | None = None) -> pd.DataFrame:
    """The newest run of each cell the reference CSV holds no value for (Co-rewarding-III, whose v3 values it lacks;
    a method or model added here), restricted to ``cell_ids`` unless None: shown as ``no paper value``, never compared
    or flagged. With each its cell group and seed (a cell's seeds one after another) and its evaluated steps."""
    return con.execute(
        """SELECT r.cell_id, s.cell_group, s.seed_index, r.method, r.base_model, r.dataset, r.status, r.last_step,
            r.total_steps,
            (SELECT count(DISTINCT e.step) FROM eval_metrics e WHERE e.run_id = r.run_id AND e.step IS NOT NULL)
                AS evaluated_steps,
            ? AS paper, r.run_id
        FROM runs r JOIN run_seeds s USING (run_id)
        WHERE (? OR list_contains(?, r.cell_id)) AND NOT EXISTS (SELECT 1 FROM paper_results p
            WHERE p.method = r.method AND p.base_model = r.base_model AND p.dataset = r.dataset)
        QUALIFY row_number() OVER (PARTITION BY r.cell_id ORDER BY r.started_at DESC NULLS LAST, r.run_id) = 1
        ORDER BY s.cell_group, s.seed_index""",
        [NO_PAPER_VALUE, cell_ids is None, list(cell_ids or [])],
    ).fetchdf()


def collapse_inputs(con: Con, run_ids: Sequence[str] | None = None) -> pd.DataFrame:
    """The metrics collapse detection reads, for the chosen runs (None: all runs), with each run's length cap."""
    return con.execute(
        """SELECT m.run_id, m.step, m.metric, m.value, r.max_response_length AS cap
        FROM training_metrics m JOIN runs r USING (run_id)
        WHERE list_contains(?, m.metric) AND (? OR list_contains(?, m.run_id))""",
        [list(COLLAPSE_METRICS), run_ids is None, list(run_ids or [])],
    ).fetchdf()
