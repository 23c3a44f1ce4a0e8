"""The store reads behind the claims (``claims``): the newest run of each cell and its seeds, their per-problem scores
on a benchmark, and the cells with two or more seeds that could lend a one-seed cell their seed variance."""

from __future__ import annotations

from collections.abc import Sequence

import duckdb
import pandas as pd

from corewarding.matrix import Cell
from corewarding.results.cell_verdicts import SAMPLED_CHECKERS
from corewarding.results.names import benchmark_key, key_sql
from corewarding.results.seed_variance import lending_group

# The newest run of each of the cells and their seeds (the store's ``run_seeds`` groups a cell's seeds)
LATEST = """WITH latest AS (
    SELECT r.run_id, r.cell_id, run_seeds.cell_group AS cell, r.last_step,
        row_number() OVER (PARTITION BY r.cell_id ORDER BY r.started_at DESC NULLS LAST, r.run_id DESC) AS k
    FROM runs r JOIN run_seeds USING (run_id) WHERE list_contains(?, run_seeds.cell_group))"""


def problem_scores(con: duckdb.DuckDBPyConnection, cells: Sequence[Cell], benchmark: str, checker: str) -> pd.DataFrame:
    """Per cell (seed 0's id) and seed: the newest run's per-problem scores at its newest step evaluated on
    ``benchmark`` (the mean over samples of the checker's verdict): cell, cell_id, run_id, problem_id, score.
    ``benchmark`` matches every spelling of it (``names.benchmark_key``: ``math500`` finds ``MATH500``)."""
    column = SAMPLED_CHECKERS[checker]
    return con.execute(
        LATEST
        + f""", picked AS (SELECT * FROM latest WHERE k = 1),
        scored AS (
            SELECT s.run_id, s.step, s.problem_id, s.{column} AS verdict FROM eval_samples s
            WHERE list_contains((SELECT list(run_id) FROM picked), s.run_id) AND {key_sql("s.benchmark")} = ?),
        newest AS (SELECT run_id, max(step) AS step FROM scored GROUP BY run_id)
        SELECT l.cell, l.cell_id, s.run_id, s.problem_id, avg(s.verdict::DOUBLE) AS score
        FROM scored s JOIN newest n USING (run_id, step) JOIN picked l USING (run_id)
        GROUP BY ALL ORDER BY l.cell_id, s.problem_id""",
        [[c.cell_id for c in cells], benchmark_key(benchmark)],
    ).fetchdf()


def lender_cells(con: duckdb.DuckDBPyConnection, borrowers: Sequence[Cell]) -> list[Cell]:
    """The store's cells with two or more seeds that could lend to ``borrowers`` (one-seed cells): the same method and
    lending group (model family and size), other than the borrowers themselves."""
    wanted = {(c.method, lending_group(c.base_model)) for c in borrowers}
    rows = con.execute(
        """SELECT DISTINCT r.method, r.base_model, r.dataset FROM runs r JOIN run_seeds s USING (run_id)
        WHERE s.cell_group IN (SELECT cell_group FROM run_seeds GROUP BY cell_group
                               HAVING count(DISTINCT seed_index) >= 2) ORDER BY ALL"""
    ).fetchall()
    own = {c.cell_id for c in borrowers}
    cells = [Cell(str(m), str(b), str(d)) for m, b, d in rows]
    return [c for c in cells if (c.method, lending_group(c.base_model)) in wanted and c.cell_id not in own]


def latest_runs(con: duckdb.DuckDBPyConnection, cells: Sequence[Cell]) -> pd.DataFrame:
    """The newest run of each cell and its seeds: run_id, cell_id, cell (seed 0's id), last_step."""
    return con.execute(
        LATEST + " SELECT run_id, cell_id, cell, last_step FROM latest WHERE k = 1", [[c.cell_id for c in cells]]
    ).fetchdf()
