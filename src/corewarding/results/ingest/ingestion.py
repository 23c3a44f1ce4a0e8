"""Idempotent ingestion of run folders, data-quality reports and the paper's numbers into the results store.

Each source file (a run's metrics.jsonl, eval/metrics.parquet, eval/samples.parquet; a quality report; the
reference CSV) has an owner (run id, report id, ``paper``). A file whose size and mtime, or else SHA-256, match the
ledger is skipped; a changed one replaces all of its owner's rows of that kind. One ingest is one transaction. So
ingesting twice adds nothing, a grown file replaces its rows, and a failure (a bad file, a full disk) leaves the store
as it was. Writers hold the store's file lock for their whole session (see store/store.py), so parallel ingests queue
and never interleave. The bookkeeping is in ``sources``, the rows of runs in ``run_rows``, of reports in
``quality_rows``.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Sequence
from functools import partial
from pathlib import Path

import duckdb

from corewarding.files import disk_full, file_sha256
from corewarding.results import reference
from corewarding.results.collapse_flags import flag_collapses
from corewarding.results.ingest import quality, released, runs
from corewarding.results.ingest.quality_rows import ingest_reports
from corewarding.results.ingest.run_folders import find_run_dirs, is_run_dir
from corewarding.results.ingest.run_rows import RUN_SOURCES, ingest_released, ingest_run, unique_runs
from corewarding.results.ingest.sources import (
    IngestSummary,
    insert_frame,
    record_source,
    source_unchanged,
    transaction,
)
from corewarding.results.store.store import default_db, first_line, writer
from corewarding.run_folder import AUDIT_RECORD, released_dir

log = logging.getLogger(__name__)


def ensure_reference(con: duckdb.DuckDBPyConnection, summary: IngestSummary | None = None) -> None:
    """Load the paper's numbers when the store lacks them or the packaged CSV changed."""
    path = reference.REFERENCE_CSV
    same, digest = source_unchanged(con, "paper", "reference", path)
    if same:
        return
    frame = reference.load_reference(path)

    def body() -> None:
        con.execute("DELETE FROM paper_results")
        count = insert_frame(con, "INSERT INTO paper_results SELECT * FROM incoming_frame", frame, [])
        record_source(con, "paper", "reference", path, digest or file_sha256(path), count)
        if summary is not None:
            summary.add("paper_results", count)

    transaction(con, body)


class StoreFullError(RuntimeError):
    """The disk (or the file size limit) ran out while the store was written; the store keeps its previous rows.

    Not an OSError: the pipeline retries those (is_transient), and a full disk does not clear by itself."""


def _source_bytes(infos: Sequence[runs.RunInfo], reports: Sequence[Path], audits: Sequence[Path] = ()) -> int:
    """The size of every file an ingest of these runs, audits and reports reads."""
    folders = [info.run_dir for info in infos] + list(audits)
    files = [folder / name for folder in folders for name, _ in RUN_SOURCES.values()]
    files += [*reports, reference.REFERENCE_CSV]
    return sum(f.stat().st_size for f in files if f.is_file())


# Disk an ingest needs per byte it reads: DuckDB logs the rows uncompressed (the WAL), then checkpoints them into the
# store. Measured on synthetic runs (parquet samples, JSONL metrics): WAL 4.8x + store growth 1.6x of the sources.
SPACE_FACTOR = 8


def _mib(n: float) -> str:
    return f"{n / 2**20:.1f} MiB"


def _ingest_all(
    con: duckdb.DuckDBPyConnection,
    infos: Sequence[runs.RunInfo],
    reports: Sequence[Path],
    audits: Sequence[tuple[released.ReleasedRecord, Path]] = (),
) -> IngestSummary:
    summary = IngestSummary()
    ensure_reference(con, summary)
    taken = unique_runs(con, infos, summary)
    for info in taken:
        ingest_run(con, info.run_dir, summary, info)
    summary.collapses = flag_collapses(con, [info.run_id for info in taken])  # news once (collapse_flags.py)
    for record, folder in audits:
        ingest_released(con, record, folder, summary)
    ingest_reports(con, reports, summary)
    return summary


def ingest(
    db: str | Path | None = None,
    runs_roots: Sequence[Path] = (),
    run_dirs: Sequence[Path] = (),
    data_dirs: Sequence[Path] = (),
    timeout: float = 300.0,
) -> IngestSummary:
    """Ingest the run folders under ``runs_roots`` plus ``run_dirs`` (with the audits of their released checkpoints,
    ``released/``), and the quality reports under ``data_dirs``, in one transaction: a failure (a bad file, a full
    disk) leaves the store as it was. A cell folder holding only an audit is ingested as that audit."""
    given = {p.resolve() for p in run_dirs}
    audited = {p.resolve() for root in runs_roots for p in released.find_released(root)}
    audited |= {released_dir(p) for p in given if (released_dir(p) / AUDIT_RECORD).is_file()}
    folders = sorted({p.resolve() for root in runs_roots for p in find_run_dirs(root)} | given)
    for folder in folders:
        if not is_run_dir(folder) and released_dir(folder) not in audited:
            raise FileNotFoundError(f"{folder}: not a run folder (needs config.yaml and metrics.jsonl)")
    folders = [f for f in folders if is_run_dir(f)]
    reports = [p for d in data_dirs for p in quality.find_reports(d)]
    infos = [runs.read_run_info(folder) for folder in folders]  # every folder read before any write
    audits = [(released.read_record(folder), folder) for folder in sorted(audited)]
    for record, folder in audits:
        released.check_matrix_repo(record, folder)
    path = Path(db) if db is not None else default_db()
    try:
        with writer(path, timeout=timeout) as con:
            summary = transaction(con, partial(_ingest_all, con, infos, reports, audits))
    except (duckdb.Error, OSError) as exc:
        if not disk_full(exc):
            raise
        needed = SPACE_FACTOR * _source_bytes(infos, reports, [folder for _, folder in audits])
        free = shutil.disk_usage(path.parent).free
        raise StoreFullError(
            f"{path}: out of disk space while writing the results store ({first_line(exc)}); {_mib(free)} free in "
            f"{path.parent}, this ingest needs about {_mib(needed)} ({SPACE_FACTOR}x the {_mib(needed / SPACE_FACTOR)} "
            "it reads). The store keeps its previous rows: free some space and run it again"
        ) from None
    log.info(
        "ingested %d run(s), %d released checkpoint(s), %d report(s), skipped %d copied run folder(s), %d new "
        "collapse flag(s): %s",
        summary.runs,
        summary.released,
        summary.reports,
        len(summary.duplicates),
        len(summary.collapses),
        summary.rows,
    )
    return summary
