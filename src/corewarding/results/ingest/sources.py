"""The ingest's bookkeeping: what one ingest did (``IngestSummary``), the ledger of source files (``sources``: a file
whose size and mtime, or else SHA-256, match is skipped; a changed one replaces its owner's rows), and transactions.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import duckdb
import pandas as pd

from corewarding.files import file_sha256
from corewarding.results.collapse_flags import CollapseFlag

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


def source_unchanged(con: duckdb.DuckDBPyConnection, owner: str, kind: str, path: Path) -> tuple[bool, str | None]:
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


def record_source(con: duckdb.DuckDBPyConnection, owner: str, kind: str, path: Path, digest: str, rows: int) -> None:
    """Note in the ledger that ``owner``'s rows of ``kind`` now come from ``path`` (its digest and row count)."""
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


def insert_frame(con: duckdb.DuckDBPyConnection, sql: str, frame: pd.DataFrame, params: list[object]) -> int:
    """Run ``sql`` (which reads ``incoming_frame``) with ``frame`` registered as that table; return its rows."""
    con.register("incoming_frame", frame)
    try:
        con.execute(sql, params)
    finally:
        con.unregister("incoming_frame")
    return len(frame)


def replace_source(
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
    same, digest = source_unchanged(con, owner, kind, path)
    if same:
        summary.unchanged += 1
        return
    con.execute(f"DELETE FROM {table} WHERE run_id = ?", [owner])
    count = loader(con, owner, path)
    record_source(con, owner, kind, path, digest or file_sha256(path), count)
    summary.add(table, count)
    summary.changed.append(str(path))
