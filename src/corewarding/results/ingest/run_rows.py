"""A run's rows and an audited released checkpoint's rows in the store: upserted, replaced per changed file, dropped;
and one folder per training run (a copy of a run found elsewhere is skipped)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from functools import partial
from pathlib import Path

import duckdb

from corewarding import run_folder
from corewarding.results.ingest import evaluation, released, runs
from corewarding.results.ingest.run_folders import is_run_dir
from corewarding.results.ingest.sources import IngestSummary, Loader, insert_frame, replace_source, transaction

log = logging.getLogger(__name__)


def metrics_loader(allow_partial_tail: bool) -> Loader:
    """The loader of a run's ``metrics.jsonl`` (``allow_partial_tail``: skip an unfinished last line)."""

    def load(con: duckdb.DuckDBPyConnection, run_id: str, path: Path) -> int:
        frame = runs.read_metrics(path, allow_partial_tail)
        sql = "INSERT INTO training_metrics SELECT ?, metric, step, value FROM incoming_frame"
        return insert_frame(con, sql, frame, [run_id])

    return load


# kind -> (file in the run folder, table; the table names are constants, never input). In this order: the samples
# come after the metric rows they may read their checker versions from (evaluation.fill_checker_versions).
RUN_SOURCES = {
    "metrics": (Path(run_folder.METRICS), "training_metrics"),
    "eval_metrics": (run_folder.EVAL_METRICS, "eval_metrics"),
    "eval_samples": (run_folder.EVAL_SAMPLES, "eval_samples"),
}


def ingest_run(
    con: duckdb.DuckDBPyConnection, run_dir: Path, summary: IngestSummary, info: runs.RunInfo | None = None
) -> None:
    """Upsert the run's row and replace the rows of each of its files that changed, in one transaction."""
    info = info or runs.read_run_info(run_dir)
    loaders: dict[str, Loader] = {
        "metrics": metrics_loader(allow_partial_tail=info.status in ("running", "incomplete", "interrupted")),
        "eval_metrics": evaluation.insert_eval_metrics,
        "eval_samples": evaluation.insert_eval_samples,
    }

    def body() -> None:
        columns, placeholders = ", ".join(runs.RUN_COLUMNS), ", ".join("?" * len(runs.RUN_COLUMNS))
        con.execute(f"INSERT OR REPLACE INTO runs ({columns}) VALUES ({placeholders})", info.row())
        con.execute("DELETE FROM run_phase_hours WHERE run_id = ?", [info.run_id])
        phases = info.phase_rows()
        if phases:
            con.executemany("INSERT INTO run_phase_hours VALUES (?, ?, ?, ?, ?)", phases)
            summary.add("run_phase_hours", len(phases))
        for kind, (name, table) in RUN_SOURCES.items():
            replace_source(con, info.run_id, kind, run_dir / name, table, loaders[kind], summary)

    transaction(con, body)
    summary.runs += 1


RUN_TABLES = (*(table for _, table in RUN_SOURCES.values()), "run_phase_hours", "collapse_flags", "runs")

RELEASED_COLUMNS = (
    "run_id", "cell_id", "method", "base_model", "dataset", "hub_repo_id", "revision", "status", "error",
    "audited_at", "folder",
)  # fmt: skip


def ingest_released(con: duckdb.DuckDBPyConnection, record: released.ReleasedRecord, folder: Path,
                    summary: IngestSummary) -> None:  # fmt: skip
    """Upsert an audited released checkpoint and replace its changed evaluation files (source ``released``), in one
    transaction; ``folder`` is its ``released/`` folder, laid out as a run's."""
    loaders: dict[str, Loader] = {
        "eval_metrics": partial(evaluation.insert_eval_metrics, source="released"),
        "eval_samples": evaluation.insert_eval_samples,
    }
    run_id = record.run_id

    def body() -> None:
        values = [run_id, record.cell_id, record.method, record.base_model, record.dataset, record.hub_repo_id,
                  record.revision, record.status, record.error, record.audited_at, str(folder)]  # fmt: skip
        placeholders = ", ".join("?" * len(RELEASED_COLUMNS))
        con.execute(
            f"INSERT OR REPLACE INTO released_checkpoints ({', '.join(RELEASED_COLUMNS)}) VALUES ({placeholders})",
            values,
        )
        for kind, loader in loaders.items():
            name, table = RUN_SOURCES[kind]
            replace_source(con, run_id, kind, folder / name, table, loader, summary)

    transaction(con, body)
    summary.released += 1


Identity = tuple[str, str, str]


def _stored_identities(con: duckdb.DuckDBPyConnection) -> dict[Identity, runs.RunInfo | str]:
    """Identity -> run_id of the stored runs whose folder still holds a run (shallowest path first)."""
    rows = con.execute(
        """SELECT run_id, run_dir, cell_id, started_at, coalesce(config_hash, '') FROM runs
        WHERE started_at IS NOT NULL ORDER BY length(run_dir), run_dir"""
    ).fetchall()
    found: dict[Identity, runs.RunInfo | str] = {}
    for run_id, run_dir, cell_id, started, config_hash in rows:
        if run_dir and is_run_dir(Path(run_dir)):
            found.setdefault((str(cell_id), started.isoformat(), str(config_hash)), str(run_id))
    return found


def unique_runs(
    con: duckdb.DuckDBPyConnection, infos: Sequence[runs.RunInfo], summary: IngestSummary
) -> list[runs.RunInfo]:
    """One folder per training run: a folder holding a copy of a run found elsewhere (same cell, ``run.json`` start
    and config hash) is skipped, counted and logged. The run already in the store wins, else the shallowest path;
    rows an earlier ingest stored from a skipped copy are removed."""
    kept = _stored_identities(con)
    in_store = {str(r[0]) for r in con.execute("SELECT run_id FROM runs").fetchall()}
    out = []
    for info in sorted(infos, key=lambda i: (len(i.run_dir.parts), str(i.run_dir))):
        key = info.identity
        first = kept.get(key) if key is not None else None
        if key is None or first is None or first == info.run_id:
            if key is not None:
                kept[key] = info
            out.append(info)
            continue
        where = first if isinstance(first, str) else f"{first.run_id} ({first.run_dir})"
        log.warning("%s: a copy of run %s: skipped", info.run_dir, where)
        summary.duplicates.append(str(info.run_dir))
        if info.run_id in in_store:
            drop_run(con, info.run_id)
    return sorted(out, key=lambda i: str(i.run_dir))


def drop_run(con: duckdb.DuckDBPyConnection, run_id: str) -> None:
    """Remove every row of a run (and its ledger entries) in one transaction (part of an enclosing one)."""

    def body() -> None:
        for table in RUN_TABLES:  # the names are constants, never input
            con.execute(f"DELETE FROM {table} WHERE run_id = ?", [run_id])
        con.execute("DELETE FROM sources WHERE owner = ?", [run_id])

    transaction(con, body)
