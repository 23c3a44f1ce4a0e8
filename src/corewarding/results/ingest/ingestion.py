"""Idempotent ingestion of run folders, data-quality reports and the paper's numbers into the results store.

Each source file (a run's metrics.jsonl, eval/metrics.parquet, eval/samples.parquet; a quality report; the
reference CSV) has an owner (run id, report id, ``paper``). A file whose size and mtime, or else SHA-256, match the
ledger is skipped; a changed one replaces all of its owner's rows of that kind. One ingest is one transaction. So
ingesting twice adds nothing, a grown file replaces its rows, and a failure (a bad file, a full disk) leaves the store
as it was. Writers hold the store's file lock for their whole session (see store.py), so parallel ingests queue and
never interleave.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable, Iterable, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TypeVar

import duckdb
import pandas as pd

from corewarding import run_folder
from corewarding.files import disk_full, file_sha256
from corewarding.results import evaluation, quality, reference, released, runs
from corewarding.results.collapse_flags import CollapseFlag, flag_collapses
from corewarding.results.store import default_db, first_line, writer
from corewarding.run_folder import AUDIT_RECORD, released_dir

log = logging.getLogger(__name__)

Loader = Callable[[duckdb.DuckDBPyConnection, str, Path], int]
T = TypeVar("T")


@dataclass
class IngestSummary:
    """What one ingestion did: sources seen, changed and unchanged, and rows inserted per table."""

    runs: int = 0
    released: int = 0  # audited released checkpoints
    reports: int = 0
    changed: list[str] = field(default_factory=list)
    unchanged: int = 0
    rows: dict[str, int] = field(default_factory=dict)
    duplicates: list[str] = field(default_factory=list)  # run folders skipped: a copy of a run ingested from elsewhere
    collapses: list[CollapseFlag] = field(default_factory=list)  # collapse flags this ingest recorded first

    def add(self, table: str, count: int) -> None:
        self.rows[table] = self.rows.get(table, 0) + count

    def to_dict(self) -> dict[str, object]:
        return {
            "runs": self.runs,
            "released": self.released,
            "reports": self.reports,
            "changed": len(self.changed),
            "unchanged": self.unchanged,
            "duplicates_skipped": len(self.duplicates),
            "rows": self.rows,
            "new_collapse_flags": [flag.to_dict() for flag in self.collapses],
        }


def _unchanged(con: duckdb.DuckDBPyConnection, owner: str, kind: str, path: Path) -> tuple[bool, str | None]:
    """Whether the ledger already holds this file's content for ``owner``/``kind``; the SHA-256 when computed."""
    stat = path.stat()
    row = con.execute(
        "SELECT size, mtime_ns, sha256 FROM sources WHERE owner = ? AND kind = ?", [owner, kind]
    ).fetchone()
    if row is not None and row[0] == stat.st_size and row[1] == stat.st_mtime_ns:
        return True, None
    digest = file_sha256(path)
    if row is not None and row[2] == digest:
        con.execute("UPDATE sources SET mtime_ns = ? WHERE owner = ? AND kind = ?", [stat.st_mtime_ns, owner, kind])
        return True, digest
    return False, digest


def _record_source(con: duckdb.DuckDBPyConnection, owner: str, kind: str, path: Path, digest: str, rows: int) -> None:
    stat = path.stat()
    con.execute(
        "INSERT OR REPLACE INTO sources VALUES (?, ?, ?, ?, ?, ?, ?, current_timestamp)",
        [owner, kind, str(path.resolve()), stat.st_size, stat.st_mtime_ns, digest, rows],
    )


_IN_TRANSACTION: set[int] = set()  # ids of the connections inside a transaction body


def transaction(con: duckdb.DuckDBPyConnection, body: Callable[[], T]) -> T:
    """Run ``body`` in one transaction: all of its writes or none. Nested, it is part of the enclosing one."""
    if id(con) in _IN_TRANSACTION:
        return body()
    con.begin()
    _IN_TRANSACTION.add(id(con))
    try:
        result = body()
        con.commit()
    except BaseException:
        with suppress(duckdb.Error):  # a failed commit leaves no transaction to roll back: keep the first error
            con.rollback()
        raise
    finally:
        _IN_TRANSACTION.discard(id(con))
    return result


def _insert_frame(con: duckdb.DuckDBPyConnection, sql: str, frame: pd.DataFrame, params: list[object]) -> int:
    con.register("incoming_frame", frame)
    try:
        con.execute(sql, params)
    finally:
        con.unregister("incoming_frame")
    return len(frame)


def _metrics_loader(allow_partial_tail: bool) -> Loader:
    def load(con: duckdb.DuckDBPyConnection, run_id: str, path: Path) -> int:
        frame = runs.read_metrics(path, allow_partial_tail)
        sql = "INSERT INTO training_metrics SELECT ?, metric, step, value FROM incoming_frame"
        return _insert_frame(con, sql, frame, [run_id])

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
        "metrics": _metrics_loader(allow_partial_tail=info.status in ("running", "incomplete", "interrupted")),
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
            _replace_source(con, info.run_id, kind, run_dir / name, table, loaders[kind], summary)

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
            _replace_source(con, run_id, kind, folder / name, table, loader, summary)

    transaction(con, body)
    summary.released += 1


def _replace_source(
    con: duckdb.DuckDBPyConnection, owner: str, kind: str, path: Path, table: str, loader: Loader,
    summary: IngestSummary,
) -> None:  # fmt: skip
    """Replace ``owner``'s rows of ``table`` from ``path`` when the file changed (or drop them when it is gone)."""
    if not path.is_file():  # gone (e.g. the run was moved aside and trained again): so are its rows
        dropped = con.execute(
            "DELETE FROM sources WHERE owner = ? AND kind = ? RETURNING path", [owner, kind]
        ).fetchall()
        if dropped:
            con.execute(f"DELETE FROM {table} WHERE run_id = ?", [owner])
            summary.changed.append(str(path))
        return
    same, digest = _unchanged(con, owner, kind, path)
    if same:
        summary.unchanged += 1
        return
    con.execute(f"DELETE FROM {table} WHERE run_id = ?", [owner])
    count = loader(con, owner, path)
    _record_source(con, owner, kind, path, digest or file_sha256(path), count)
    summary.add(table, count)
    summary.changed.append(str(path))


Identity = tuple[str, str, str]


def _stored_identities(con: duckdb.DuckDBPyConnection) -> dict[Identity, runs.RunInfo | str]:
    """Identity -> run_id of the stored runs whose folder still holds a run (shallowest path first)."""
    rows = con.execute(
        """SELECT run_id, run_dir, cell_id, started_at, coalesce(config_hash, '') FROM runs
        WHERE started_at IS NOT NULL ORDER BY length(run_dir), run_dir"""
    ).fetchall()
    found: dict[Identity, runs.RunInfo | str] = {}
    for run_id, run_dir, cell_id, started, config_hash in rows:
        if run_dir and runs.is_run_dir(Path(run_dir)):
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


QUALITY_TABLES = ("quality_reports", "quality_reasons", "quality_rows", "quality_counts")


def drop_report(con: duckdb.DuckDBPyConnection, owner: str) -> None:
    """Remove one quality report's rows from the four quality tables."""
    for table in QUALITY_TABLES:  # the names are constants, never input
        con.execute(f"DELETE FROM {table} WHERE report_id = ?", [owner])


def _replace_report(
    con: duckdb.DuckDBPyConnection, owner: str, report: quality.QualityReport, path: Path, digest: str
) -> dict[str, int]:
    """Replace one report's rows in the four quality tables; return the rows inserted per table."""
    counts = {"quality_reports": 1}
    drop_report(con, owner)
    columns, placeholders = ", ".join(quality.REPORT_COLUMNS), ", ".join("?" * len(quality.REPORT_COLUMNS))
    con.execute(f"INSERT INTO quality_reports ({columns}) VALUES ({placeholders})", report.report)
    for table, rows in (
        ("quality_reasons", report.reasons),
        ("quality_rows", report.rows),
        ("quality_counts", report.counts),
    ):
        if rows:
            names = [c[0] for c in con.execute(f"DESCRIBE {table}").fetchall()]
            _insert_frame(
                con, f"INSERT INTO {table} SELECT * FROM incoming_frame", pd.DataFrame(rows, columns=names), []
            )
        counts[table] = len(rows)
    _record_source(con, owner, "quality", path, digest, 1)
    return counts


def ingest_reports(con: duckdb.DuckDBPyConnection, paths: Iterable[Path], summary: IngestSummary) -> None:
    """Parse every report first (a malformed one stops the ingest before any write), then replace changed ones."""
    parsed = [(path, quality.parse_report(path, str(path.resolve()))) for path in paths]
    for path, report in parsed:
        owner = str(path.resolve())
        summary.reports += 1
        same, digest = _unchanged(con, owner, "quality", path)
        if same:
            summary.unchanged += 1
            continue
        inserted = transaction(con, partial(_replace_report, con, owner, report, path, digest or file_sha256(path)))
        for table, count in inserted.items():
            summary.add(table, count)
        summary.changed.append(str(path))


def ensure_reference(con: duckdb.DuckDBPyConnection, summary: IngestSummary | None = None) -> None:
    """Load the paper's numbers when the store lacks them or the packaged CSV changed."""
    path = reference.REFERENCE_CSV
    same, digest = _unchanged(con, "paper", "reference", path)
    if same:
        return
    frame = reference.load_reference(path)

    def body() -> None:
        con.execute("DELETE FROM paper_results")
        count = _insert_frame(con, "INSERT INTO paper_results SELECT * FROM incoming_frame", frame, [])
        _record_source(con, "paper", "reference", path, digest or file_sha256(path), count)
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
    folders = sorted({p.resolve() for root in runs_roots for p in runs.find_run_dirs(root)} | given)
    for folder in folders:
        if not runs.is_run_dir(folder) and released_dir(folder) not in audited:
            raise FileNotFoundError(f"{folder}: not a run folder (needs config.yaml and metrics.jsonl)")
    folders = [f for f in folders if runs.is_run_dir(f)]
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
