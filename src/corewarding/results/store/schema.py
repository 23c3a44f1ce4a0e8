"""The results store's schema, its version, and the migrations that bring an older store up to date.

Every table carries the key its rows are replaced by (a run, a report, the paper table), so ingestion replaces a
source's rows as a whole inside one transaction and never adds a row twice. ``sources`` is the ingestion ledger: which
file was ingested for which owner, with its size, mtime and SHA-256, so unchanged files are skipped.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

import duckdb

log = logging.getLogger(__name__)

_V1 = [
    """CREATE TABLE runs (
        run_id VARCHAR PRIMARY KEY, cell_id VARCHAR NOT NULL, method VARCHAR NOT NULL, base_model VARCHAR NOT NULL,
        dataset VARCHAR NOT NULL, backend VARCHAR, hub_repo_id VARCHAR, config_hash VARCHAR, code_version VARCHAR,
        data_hashes VARCHAR, status VARCHAR NOT NULL, started_at TIMESTAMP, ended_at TIMESTAMP, run_dir VARCHAR,
        total_steps INTEGER, last_step INTEGER, max_response_length INTEGER, error VARCHAR)""",
    """CREATE TABLE training_metrics (
        run_id VARCHAR NOT NULL, metric VARCHAR NOT NULL, step INTEGER NOT NULL, value DOUBLE,
        PRIMARY KEY (run_id, metric, step))""",
    """CREATE TABLE eval_metrics (
        run_id VARCHAR NOT NULL, step INTEGER, benchmark VARCHAR NOT NULL, benchmark_key VARCHAR NOT NULL,
        checker VARCHAR NOT NULL, metric VARCHAR NOT NULL, value DOUBLE, ci_low DOUBLE, ci_high DOUBLE, n INTEGER,
        num_problems INTEGER, temperature DOUBLE, seed BIGINT, model_revision VARCHAR)""",
    """CREATE TABLE eval_samples (
        run_id VARCHAR NOT NULL, step INTEGER, benchmark VARCHAR NOT NULL, problem_id VARCHAR NOT NULL,
        sample_index INTEGER NOT NULL, response VARCHAR, extracted_answer VARCHAR, correct_strict BOOLEAN,
        correct_math_verify BOOLEAN, length INTEGER, truncated BOOLEAN)""",
    """CREATE TABLE quality_reports (
        report_id VARCHAR PRIMARY KEY, path VARCHAR, dataset VARCHAR, stage VARCHAR, split VARCHAR, source VARCHAR,
        output VARCHAR, rows_in BIGINT, rows_out BIGINT, dropped_total BIGINT, rejected_total BIGINT,
        flagged_total BIGINT, report VARCHAR)""",
    """CREATE TABLE quality_reasons (
        report_id VARCHAR NOT NULL, kind VARCHAR NOT NULL, reason VARCHAR NOT NULL, count BIGINT,
        PRIMARY KEY (report_id, kind, reason))""",
    """CREATE TABLE quality_rows (
        report_id VARCHAR NOT NULL, kind VARCHAR NOT NULL, position INTEGER NOT NULL, row_ref VARCHAR,
        row_index VARCHAR, reason VARCHAR, attempts INTEGER, action VARCHAR, detail VARCHAR,
        PRIMARY KEY (report_id, kind, position))""",
    """CREATE TABLE quality_counts (
        report_id VARCHAR NOT NULL, column_name VARCHAR NOT NULL, value VARCHAR NOT NULL, count BIGINT,
        PRIMARY KEY (report_id, column_name, value))""",
    """CREATE TABLE paper_results (
        table_name VARCHAR NOT NULL, train_set VARCHAR NOT NULL, model VARCHAR NOT NULL, method VARCHAR NOT NULL,
        benchmark VARCHAR NOT NULL, value DOUBLE, suspect BOOLEAN, metric VARCHAR, base_model VARCHAR,
        dataset VARCHAR, benchmark_key VARCHAR, PRIMARY KEY (table_name, train_set, model, method, benchmark))""",
    """CREATE TABLE sources (
        owner VARCHAR NOT NULL, kind VARCHAR NOT NULL, path VARCHAR, size BIGINT, mtime_ns BIGINT, sha256 VARCHAR,
        rows BIGINT, ingested_at TIMESTAMP, PRIMARY KEY (owner, kind))""",
]

# v2: each sample's question and gold answer; what the run folder's publish record says was pushed to the Hub. The
# ledger forgets the samples files so the next ingest reloads them with the new columns (NULL where a file lacks them).
_V2 = [
    "ALTER TABLE eval_samples ADD COLUMN question VARCHAR",
    "ALTER TABLE eval_samples ADD COLUMN gold VARCHAR",
    "ALTER TABLE runs ADD COLUMN published_step INTEGER",
    "ALTER TABLE runs ADD COLUMN published_commit VARCHAR",
    "DELETE FROM sources WHERE kind = 'eval_samples'",
]

# v3: each run's resolved config (its config.yaml as JSON), for the dashboard's run page and config diff; filled in
# by the next ingest, which rewrites every run's row.
_V3 = ["ALTER TABLE runs ADD COLUMN config VARCHAR"]

# v4: released checkpoints apart from reproduction runs. Every evaluation row says where its weights came from
# (``source``: reproduced, or released for a paper checkpoint from the Hub, whose rows have run_id
# ``released/<cell_id>``) and the settings it was produced with (``settings`` JSON, ``settings_key`` of the
# comparable ones; see evaluation/provenance.py); ``released_checkpoints`` holds one audited Hub checkpoint per cell.
# Rows stored before v4 have no settings: they are NULL, and such a row is never called comparable.
_V4 = [
    "ALTER TABLE eval_metrics ADD COLUMN source VARCHAR DEFAULT 'reproduced'",
    "ALTER TABLE eval_metrics ADD COLUMN settings VARCHAR",
    "ALTER TABLE eval_metrics ADD COLUMN settings_key VARCHAR",
    "ALTER TABLE eval_samples ADD COLUMN settings_key VARCHAR",
    """CREATE TABLE released_checkpoints (
        run_id VARCHAR PRIMARY KEY, cell_id VARCHAR NOT NULL, method VARCHAR NOT NULL, base_model VARCHAR NOT NULL,
        dataset VARCHAR NOT NULL, hub_repo_id VARCHAR NOT NULL, revision VARCHAR, status VARCHAR NOT NULL,
        error VARCHAR, audited_at TIMESTAMP, folder VARCHAR)""",
]

# v5: each pipeline attempt at a cell, finished or failed (with why), under the training config hash it ran with. A
# failed attempt leaves no run row, so without it the store would show the cell's older finished run as its result.
# Keyed by the attempt's flow run id (a generated id when it had none), so recording it again replaces its row.
_V5 = [
    """CREATE TABLE cell_attempts (
        attempt_id VARCHAR PRIMARY KEY, cell_id VARCHAR NOT NULL, config_hash VARCHAR, attempt VARCHAR,
        status VARCHAR NOT NULL, reason VARCHAR, recorded_at TIMESTAMP NOT NULL)""",
]

# v6: the GPU-hour ledger. Each run's devices (type, count) and what it held them for (run.json ``compute``: wall
# seconds over its launches, device-hours, GPU-hours: only CUDA devices count as GPUs), and verl's phases in
# ``run_phase_hours``. NULL for a run whose run.json has no ledger (trained before it existed); the next ingest rewrites
# every run's row, so the columns fill in without forgetting any source.
_V6 = [
    "ALTER TABLE runs ADD COLUMN device_type VARCHAR",
    "ALTER TABLE runs ADD COLUMN devices INTEGER",
    "ALTER TABLE runs ADD COLUMN wall_seconds DOUBLE",
    "ALTER TABLE runs ADD COLUMN device_hours DOUBLE",
    "ALTER TABLE runs ADD COLUMN gpu_hours DOUBLE",
    """CREATE TABLE run_phase_hours (
        run_id VARCHAR NOT NULL, phase VARCHAR NOT NULL, seconds DOUBLE, device_hours DOUBLE, gpu_hours DOUBLE,
        PRIMARY KEY (run_id, phase))""",
]

# v7: a cell's seeds grouped. ``run_seeds`` gives every run its cell group (the seed-0 cell id that all the cell's
# seeds share) and its seed index, read off the cell id (the SQL twin of ``matrix.SEED_TAG``: ``<cell_id>__seed<k>``,
# k >= 1; no tag is seed 0). A view, so every row that reaches ``runs`` is grouped, whoever wrote it.
SEED_GROUP_SQL = "regexp_replace(cell_id, '__seed[1-9][0-9]*$', '')"
_V7 = [
    f"""CREATE VIEW run_seeds AS SELECT run_id, cell_id, {SEED_GROUP_SQL} AS cell_group,
        coalesce(TRY_CAST(regexp_extract(cell_id, '__seed([1-9][0-9]*)$', 1) AS INTEGER), 0) AS seed_index
        FROM runs""",
]

# v8: each sample says which version of each checker gave its verdicts (``checker_version_<checker>``, as
# ``evaluation/provenance.checker_version`` writes it; NULL where that checker gave no verdict), so a claim never mixes
# samples graded by different code. Rows stored before v8 are NULL (unknown); the ledger forgets the samples files, so
# the next ingest reloads them and fills in what their files or their units' metric rows record.
_V8 = [
    "ALTER TABLE eval_samples ADD COLUMN checker_version_strict VARCHAR",
    "ALTER TABLE eval_samples ADD COLUMN checker_version_math_verify VARCHAR",
    "DELETE FROM sources WHERE kind = 'eval_samples'",
]

# v9: what the alerts compare with (docs/orchestration.md#alerts). ``collapse_flags``: each collapse rule that fires
# on a run, recorded by the ingest that first sees it (one row per run and rule; gone when the rule no longer fires, as
# after a replaced metrics file); ``claim_verdicts``: each claim's verdict under a checker, one row per change, the
# newest row the verdict now (the pipeline's claims check appends a row only when the verdict differs from it).
_V9 = [
    """CREATE TABLE collapse_flags (
        run_id VARCHAR NOT NULL, cell_id VARCHAR NOT NULL, rule VARCHAR NOT NULL, step INTEGER, detail VARCHAR,
        flagged_at TIMESTAMP NOT NULL, PRIMARY KEY (run_id, rule))""",
    """CREATE TABLE claim_verdicts (
        claim_id VARCHAR NOT NULL, checker VARCHAR NOT NULL, verdict VARCHAR NOT NULL, effect DOUBLE, low DOUBLE,
        high DOUBLE, note VARCHAR, recorded_at TIMESTAMP NOT NULL)""",
]

# v10: each sample's finish_reason (the generator's: stop, length ...), which samples.parquet always had and ingest
# dropped. The ledger forgets the samples files so the next ingest reloads them with it.
_V10 = [
    "ALTER TABLE eval_samples ADD COLUMN finish_reason VARCHAR",
    "DELETE FROM sources WHERE kind = 'eval_samples'",
]

# version -> the statements that bring a store from version - 1 to it. Append; never edit a released version.
MIGRATIONS: dict[int, list[str]] = {1: _V1, 2: _V2, 3: _V3, 4: _V4, 5: _V5, 6: _V6, 7: _V7, 8: _V8, 9: _V9, 10: _V10}
SCHEMA_VERSION = max(MIGRATIONS)


class SchemaError(RuntimeError):
    """The store's schema cannot be used by this code (newer, or older and opened read-only)."""


def current_version(con: duckdb.DuckDBPyConnection) -> int:
    """The store's schema version; 0 for an empty database."""
    try:
        row = con.execute("SELECT max(version) FROM schema_version").fetchone()
    except duckdb.CatalogException:  # no such table: a new, empty database
        return 0
    return int(row[0]) if row and row[0] is not None else 0


def migrate(con: duckdb.DuckDBPyConnection, migrations: Mapping[int, Sequence[str]] = MIGRATIONS) -> int:
    """Apply the missing migrations, each in its own transaction; return the version reached."""
    target = max(migrations)
    version = current_version(con)
    if version > target:
        raise SchemaError(f"the store has schema v{version}, newer than this code's v{target}; upgrade corewarding")
    if version == 0:
        con.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, applied_at TIMESTAMP)")
    for step in range(version + 1, target + 1):
        con.begin()
        try:
            for statement in migrations[step]:
                con.execute(statement)
            con.execute("INSERT INTO schema_version VALUES (?, current_timestamp)", [step])
            con.commit()
        except BaseException:
            con.rollback()
            raise
        log.info("results store migrated to schema v%d", step)
    return target


def check_readable(con: duckdb.DuckDBPyConnection) -> int:
    """The version of a store opened read-only; it must equal this code's (a reader cannot migrate)."""
    version = current_version(con)
    if version != SCHEMA_VERSION:
        hint = "run `corewarding results ingest` to migrate it" if version < SCHEMA_VERSION else "upgrade corewarding"
        raise SchemaError(f"the store has schema v{version}, this code reads v{SCHEMA_VERSION}: {hint}")
    return version
