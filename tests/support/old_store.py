"""A results store as an older corewarding left it: the schema's migrations up to a version, nothing after."""

from __future__ import annotations

from pathlib import Path

import duckdb

from corewarding.results.store import schema


def store_at_version(db: Path, version: int) -> duckdb.DuckDBPyConnection:
    """A new store at ``db`` migrated to schema ``version`` only, open for the test to fill as that version could."""
    con = duckdb.connect(str(db))
    schema.migrate(con, {v: schema.MIGRATIONS[v] for v in range(1, version + 1)})
    return con
