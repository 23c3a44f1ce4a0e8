"""Evaluation outputs of a run (``eval/metrics.parquet``, ``eval/samples.parquet``) loaded into the store.

metrics.parquet: step (null = the base model), benchmark, checker (strict | math_verify; lm_eval | livecodebench |
zeroeval for the external benchmarks), metric (pass@1, avg@8, pass@8, maj@8 ...), value (a fraction in [0, 1] for
those), ci_low, ci_high, n (samples per problem), num_problems, temperature, seed, model_revision, settings (the
JSON of evaluation/provenance.py) and settings_key.
samples.parquet: step, benchmark, problem_id, sample_index, response, extracted_answer, correct_strict,
correct_math_verify, length (tokens), truncated, finish_reason, question (the prompt's last user message), gold (the
reference answer), settings_key (the unit's settings, checker aside), checker_version_strict and
checker_version_math_verify (the code that gave each verdict: provenance.checker_version). A file written before the
versions were kept gets them from its unit's metric rows (``fill_checker_versions``). Both files' columns are
``eval_rows``' tables, which the writer (``evaluation/outputs.py``) uses too; a column the store does not keep
(``model``) and any extra column are ignored; optional columns that are absent (older files) load as NULL.
Benchmarks are stored under their canonical name (``names.benchmark_name``: ``math500`` and ``Math-500`` as
``MATH500``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import duckdb
import pyarrow.parquet as pq

from corewarding.eval_rows import (
    METRIC_CHECKERS,
    METRIC_TABLE,
    SAMPLE_CHECKERS,
    SAMPLE_TABLE,
    Column,
    stored,
    verdict_column,
    version_column,
)
from corewarding.results.names import benchmark_name, key_sql
from corewarding.settings_diff import settings_dict, settings_key

CHECKERS = METRIC_CHECKERS  # a metric row's checker: the math harness's or an external tool's
SOURCES = ("reproduced", "released")  # where the evaluated weights came from
# the columns loaded, in the tables' order: the store's columns of the same names
METRIC_COLUMNS = stored(METRIC_TABLE)
SAMPLE_COLUMNS = stored(SAMPLE_TABLE)


class EvalFileError(ValueError):
    """An evaluation file that cannot be ingested; the message names the file and the column or row."""


def _select_list(path: Path, columns: Sequence[Column]) -> str:
    """The SELECT list casting each known column; absent optional ones are NULL (names come from the lists above)."""
    try:
        present = set(pq.read_schema(path).names)
    except (OSError, ValueError) as exc:
        raise EvalFileError(f"{path}: cannot read parquet ({exc})") from exc
    missing = [c.name for c in columns if c.required and c.name not in present]
    if missing:
        raise EvalFileError(f"{path}: missing column(s) {', '.join(missing)}")
    return ", ".join(f'CAST("{c.name}" AS {c.sql})' if c.name in present else f"CAST(NULL AS {c.sql})" for c in columns)


def _load(con: duckdb.DuckDBPyConnection, path: Path, columns: Sequence[Column]) -> None:
    """Load ``path`` into the temporary table ``incoming`` with the known columns cast to their types."""
    select = _select_list(path, columns)
    names = ", ".join(c.name for c in columns)
    con.execute("DROP TABLE IF EXISTS incoming")
    try:
        con.execute(f"CREATE TEMP TABLE incoming ({names}) AS SELECT {select} FROM read_parquet(?)", [str(path)])
    except duckdb.Error as exc:
        raise EvalFileError(f"{path}: a column has values of the wrong type ({exc})") from exc
    _canonical_benchmarks(con)


def _canonical_benchmarks(con: duckdb.DuckDBPyConnection) -> None:
    """Rename every benchmark of ``incoming`` to its canonical spelling (``names.benchmark_name``): the one place a
    benchmark name is normalised on its way into the store, before the duplicate checks see it."""
    rows = con.execute("SELECT DISTINCT benchmark FROM incoming WHERE benchmark IS NOT NULL").fetchall()
    for (name,) in rows:
        if benchmark_name(name) != name:
            con.execute("UPDATE incoming SET benchmark = ? WHERE benchmark = ?", [benchmark_name(name), name])


def _first_bad(con: duckdb.DuckDBPyConnection, where: str) -> tuple[object, ...] | None:
    return con.execute(
        f"SELECT * FROM (SELECT row_number() OVER () AS row, * FROM incoming) WHERE {where} LIMIT 1"
    ).fetchone()


def _refuse_duplicates(con: duckdb.DuckDBPyConnection, path: Path, key: tuple[str, ...]) -> None:
    """EvalFileError naming the first ``key`` that more than one incoming row holds."""
    dup = con.execute(
        f"SELECT {', '.join(key)}, count(*) FROM incoming GROUP BY ALL HAVING count(*) > 1 LIMIT 1"
    ).fetchone()
    if dup is not None:
        raise EvalFileError(f"{path}: {'/'.join(key)} {dup[: len(key)]} appears {dup[len(key)]} times")


def insert_eval_metrics(con: duckdb.DuckDBPyConnection, run_id: str, path: Path, source: str = "reproduced") -> int:
    """Check and insert ``eval/metrics.parquet`` (``source``: reproduced or released); return the rows inserted.

    One row per step, benchmark, checker, metric and settings key: an audit keeps a score per protocol."""
    _load(con, path, METRIC_COLUMNS)
    checks = [
        ("benchmark IS NULL OR metric IS NULL OR checker IS NULL", "benchmark, checker and metric must be set"),
        (f"checker NOT IN ({', '.join(repr(c) for c in CHECKERS)})", f"checker must be one of {', '.join(CHECKERS)}"),
        (
            "regexp_matches(metric, '^(pass|avg|maj)@[0-9]+$') AND (value < 0 OR value > 1)",
            "pass@k / avg@k / maj@k values must be fractions in [0, 1]",
        ),
    ]
    for where, requirement in checks:
        bad = _first_bad(con, where)
        if bad is not None:
            raise EvalFileError(f"{path}: row {bad[0]}: {requirement} (got {bad[1:]})")
    _refuse_duplicates(con, path, ("step", "benchmark", "checker", "metric", "settings_key"))
    if source not in SOURCES:
        raise ValueError(f"source={source!r}: one of {', '.join(SOURCES)}")
    names = ", ".join(c.name for c in METRIC_COLUMNS[2:])  # after step and benchmark
    return _insert(
        con,
        f"INSERT INTO eval_metrics (run_id, step, benchmark, benchmark_key, {names}, source) "
        f"SELECT ?, step, benchmark, {key_sql('benchmark')}, {names}, '{source}' FROM incoming",
        run_id,
    )


def insert_eval_samples(con: duckdb.DuckDBPyConnection, run_id: str, path: Path) -> int:
    """Check and insert ``eval/samples.parquet`` (sorted, so one run's samples sit together); return the rows."""
    _load(con, path, SAMPLE_COLUMNS)
    bad = _first_bad(con, "benchmark IS NULL OR problem_id IS NULL OR sample_index IS NULL")
    if bad is not None:
        raise EvalFileError(f"{path}: row {bad[0]}: benchmark, problem_id and sample_index must be set")
    _refuse_duplicates(con, path, ("step", "benchmark", "problem_id", "sample_index", "settings_key"))
    fill_checker_versions(con, run_id)
    names = ", ".join(c.name for c in SAMPLE_COLUMNS)
    return _insert(
        con,
        f"INSERT INTO eval_samples (run_id, {names}) SELECT ?, {names} FROM incoming "
        "ORDER BY step, benchmark, settings_key, problem_id, sample_index",
        run_id,
    )


def _unit_versions(con: duckdb.DuckDBPyConnection, run_id: str) -> dict[tuple[object, ...], str]:
    """(step, benchmark, unit settings key, checker) -> the checker version the run's stored metric rows of that unit
    record. A metric row's settings are its unit's plus ``checker_tool`` and ``checker_version`` (provenance.py), so
    without those two they key the unit as its samples' ``settings_key`` does. A unit whose rows disagree is left
    out."""
    rows = con.execute(
        "SELECT DISTINCT step, benchmark, checker, settings FROM eval_metrics "
        "WHERE run_id = ? AND settings IS NOT NULL AND list_contains(?, checker)",
        [run_id, list(SAMPLE_CHECKERS)],
    ).fetchall()
    found: dict[tuple[object, ...], set[object]] = {}
    for step, benchmark, checker, settings in rows:
        unit = settings_dict(settings)
        if unit is None:
            continue
        version = unit.pop("checker_version", None)
        unit.pop("checker_tool", None)
        found.setdefault((step, benchmark, settings_key(unit), checker), set()).add(version)
    return {key: str(next(iter(v))) for key, v in found.items() if len(v) == 1 and None not in v}


def fill_checker_versions(con: duckdb.DuckDBPyConnection, run_id: str) -> None:
    """Give each sample of ``incoming`` with a verdict but no checker version (a file written before the versions
    were kept) the version its unit's metric rows record: one process scored a unit's samples and metrics, with the
    same code. Reads the run's ``eval_metrics``, which an ingest replaces before its samples."""
    for (step, benchmark, key, checker), version in _unit_versions(con, run_id).items():
        column, verdict = version_column(str(checker)), verdict_column(str(checker))  # of SAMPLE_CHECKERS, not input
        con.execute(
            f"UPDATE incoming SET {column} = ? WHERE {column} IS NULL AND {verdict} IS NOT NULL "
            "AND step IS NOT DISTINCT FROM ? AND benchmark = ? AND settings_key = ?",
            [version, step, benchmark, key],
        )


def _insert(con: duckdb.DuckDBPyConnection, sql: str, run_id: str) -> int:
    con.execute(sql, [run_id])
    count = con.execute("SELECT count(*) FROM incoming").fetchone()
    con.execute("DROP TABLE incoming")
    return int(count[0]) if count else 0
