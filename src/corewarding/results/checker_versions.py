"""Which checker versions graded the stored samples of some runs, so a claim can refuse to pool verdicts of two.

Each ``eval_samples`` row carries the version of each checker that gave it a verdict (``checker_version_<checker>``,
store v8); a row stored before v8, or from a file that recorded none, has NULL: unknown.
"""

from __future__ import annotations

from collections.abc import Sequence

import duckdb

from corewarding.results import names
from corewarding.results.ingest.evaluation import SAMPLE_CHECKERS


def sample_checker_versions(
    con: duckdb.DuckDBPyConnection, run_ids: Sequence[str], benchmark_key: str, checker: str
) -> set[str | None]:
    """The versions of ``checker`` (strict | math_verify) on the samples of ``run_ids`` that have a verdict of it on
    the benchmark ``benchmark_key`` (its key, or any spelling of its name), every step; None stands for samples of
    unknown version. More than one element: the samples were not all graded by the same code (or some by unknown)."""
    if checker not in SAMPLE_CHECKERS:
        raise ValueError(f"checker={checker!r}: samples carry verdicts of {', '.join(SAMPLE_CHECKERS)} only")
    rows = con.execute(
        f"""SELECT DISTINCT checker_version_{checker} FROM eval_samples
        WHERE list_contains(?, run_id) AND {names.key_sql("benchmark")} = ? AND correct_{checker} IS NOT NULL""",
        [list(run_ids), names.benchmark_key(benchmark_key)],
    ).fetchall()
    return {row[0] for row in rows}
