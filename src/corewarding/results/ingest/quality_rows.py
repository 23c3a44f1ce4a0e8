"""Data-quality reports' rows in the store's four quality tables: parsed first, then replaced when changed."""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial
from pathlib import Path

import duckdb
import pandas as pd

from corewarding.files import file_sha256
from corewarding.results.ingest import quality
from corewarding.results.ingest.sources import (
    IngestSummary,
    insert_frame,
    record_source,
    source_unchanged,
    transaction,
)

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
            insert_frame(
                con, f"INSERT INTO {table} SELECT * FROM incoming_frame", pd.DataFrame(rows, columns=names), []
            )
        counts[table] = len(rows)
    record_source(con, owner, "quality", path, digest, 1)
    return counts


def ingest_reports(con: duckdb.DuckDBPyConnection, paths: Iterable[Path], summary: IngestSummary) -> None:
    """Parse every report first (a malformed one stops the ingest before any write), then replace changed ones."""
    parsed = [(path, quality.parse_report(path, str(path.resolve()))) for path in paths]
    for path, report in parsed:
        owner = str(path.resolve())
        summary.reports += 1
        same, digest = source_unchanged(con, owner, "quality", path)
        if same:
            summary.unchanged += 1
            continue
        inserted = transaction(con, partial(_replace_report, con, owner, report, path, digest or file_sha256(path)))
        for table, count in inserted.items():
            summary.add(table, count)
        summary.changed.append(str(path))
