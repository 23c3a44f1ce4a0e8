"""Read queries shared by the dashboard and the reproduction report: paper vs measured, and collapse inputs.

Pure functions of a read-only DuckDB connection and plain values; every value reaches SQL as a bound parameter.
"""

from __future__ import annotations

from collections.abc import Sequence

import duckdb
import pandas as pd

from corewarding.results.collapse import METRICS as COLLAPSE_METRICS

Con = duckdb.DuckDBPyConnection


def paper_tables(con: Con) -> list[str]:
    """The paper tables in the store, sorted."""
    return [r[0] for r in con.execute("SELECT DISTINCT table_name FROM paper_results ORDER BY 1").fetchall()]


_PAPER_SQL = """
WITH ref AS (SELECT *, rowid AS ord FROM paper_results WHERE table_name = $table),
evaluated AS (
    SELECT r.run_id, r.method, r.base_model, r.dataset, r.started_at, e.step, e.benchmark_key, e.metric, e.value,
           e.ci_low, e.ci_high, e.n, e.num_problems
    FROM eval_metrics e JOIN runs r USING (run_id) WHERE e.checker = $checker),
trained AS (
    SELECT ref.ord, ev.run_id, ev.step, ev.value, ev.ci_low, ev.ci_high, ev.n, ev.num_problems
    FROM ref JOIN evaluated ev ON ev.method = ref.method AND ev.base_model = ref.base_model
        AND ev.dataset = ref.dataset AND ev.benchmark_key = ref.benchmark_key AND ev.metric = ref.metric
        AND ev.step IS NOT NULL
    QUALIFY row_number() OVER (PARTITION BY ref.ord ORDER BY ev.started_at DESC NULLS LAST, ev.run_id,
        CASE WHEN $policy = 'best' THEN ev.value ELSE ev.step END DESC) = 1),
base AS (
    SELECT ref.ord, ev.run_id, ev.step, ev.value, ev.ci_low, ev.ci_high, ev.n, ev.num_problems
    FROM ref JOIN evaluated ev ON ref.method = 'base' AND ev.base_model = ref.base_model
        AND ev.benchmark_key = ref.benchmark_key AND ev.metric = ref.metric AND ev.step IS NULL
    QUALIFY row_number() OVER (PARTITION BY ref.ord ORDER BY (ev.dataset = ref.dataset) DESC,
        ev.started_at DESC NULLS LAST, ev.run_id) = 1),
measured AS (SELECT * FROM trained UNION ALL SELECT * FROM base)
SELECT ref.train_set, ref.model, ref.method, ref.benchmark, ref.metric, ref.value AS paper,
       round(m.value * 100, 2) AS measured, round(m.value * 100 - ref.value, 2) AS difference,
       CASE WHEN ref.method = 'base' AND m.run_id IS NOT NULL THEN 'base model' ELSE CAST(m.step AS VARCHAR) END
           AS checkpoint_step,
       round(m.ci_low * 100, 2) AS ci_low, round(m.ci_high * 100, 2) AS ci_high, m.n, m.num_problems,
       ref.suspect, m.run_id
FROM ref LEFT JOIN measured m USING (ord) ORDER BY ref.ord
"""


def paper_comparison(con: Con, table: str, checker: str, policy: str = "latest") -> pd.DataFrame:
    """Each cell of a paper table beside the measured value (percent) of the newest run of that cell.

    ``policy`` picks the checkpoint: ``latest`` (the last evaluated step) or ``best`` (the step with the highest
    value); the base rows use the base-model evaluation (step null) of a run of that model.
    """
    if policy not in ("latest", "best"):
        raise ValueError(f"policy={policy!r}: latest or best")
    return con.execute(_PAPER_SQL, {"table": table, "checker": checker, "policy": policy}).fetchdf()


NO_PAPER_VALUE = "no paper value"


def runs_without_paper_value(con: Con, cell_ids: Sequence[str] | None = None) -> pd.DataFrame:
    """The newest run of each cell the paper's tables print no value for (Co-rewarding-III, a method or model added
    here), restricted to ``cell_ids`` unless None: shown as ``no paper value``, never compared or flagged. With
    each its evaluated steps and the newest evaluation's step."""
    return con.execute(
        """SELECT r.cell_id, r.method, r.base_model, r.dataset, r.status, r.last_step, r.total_steps,
            (SELECT count(DISTINCT e.step) FROM eval_metrics e WHERE e.run_id = r.run_id AND e.step IS NOT NULL)
                AS evaluated_steps,
            ? AS paper, r.run_id
        FROM runs r
        WHERE (? OR list_contains(?, r.cell_id)) AND NOT EXISTS (SELECT 1 FROM paper_results p
            WHERE p.method = r.method AND p.base_model = r.base_model AND p.dataset = r.dataset)
        QUALIFY row_number() OVER (PARTITION BY r.cell_id ORDER BY r.started_at DESC NULLS LAST, r.run_id) = 1
        ORDER BY r.cell_id""",
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
