"""Damage a DuckDB results store the way a bad disk or a stray write would, and check that DuckDB notices."""

from __future__ import annotations

import hashlib
from pathlib import Path

import duckdb

HEADER = 3 * 4096  # DuckDB's file header and its two database headers come before block 0


def full_scan(db: Path) -> None:
    """Read every column of every table with a plain DuckDB connection (raises on a damaged block)."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        for (table,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall():
            con.execute(f'SELECT bit_xor(hash(COLUMNS(*))) FROM "{table}"').fetchall()
    finally:
        con.close()


def damage(db: Path, table: str) -> None:
    """Overwrite 4 KiB in the middle of the first data block of ``table`` with distinct words (DuckDB's checksum
    XORs per-word hashes: flipping two equal words the same way would cancel out and go unnoticed)."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        (size,) = con.execute("SELECT block_size FROM pragma_database_size()").fetchone()  # type: ignore[misc]
        (block,) = con.execute(
            "SELECT min(block_id) FROM pragma_storage_info(?) WHERE block_id >= 0", [table]
        ).fetchone()  # type: ignore[misc]
    finally:
        con.close()
    noise = b"".join(hashlib.sha256(str(i).encode()).digest() for i in range(128))
    with db.open("r+b") as handle:
        handle.seek(HEADER + block * size + size // 2)
        handle.write(noise)
