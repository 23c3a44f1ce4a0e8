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


def data_block(db: Path, table: str) -> int:
    """The first block holding ``table``'s column data."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        row = con.execute("SELECT min(block_id) FROM pragma_storage_info(?) WHERE block_id >= 0", [table]).fetchone()
    finally:
        con.close()
    assert row is not None and row[0] is not None
    return int(row[0])


def index_blocks(db: Path) -> list[int]:
    """The blocks that hold neither metadata nor column data: the primary-key indexes."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        (total,) = con.execute("SELECT total_blocks FROM pragma_database_size()").fetchone()  # type: ignore[misc]
        meta = {r[0] for r in con.execute("SELECT block_id FROM pragma_metadata_info()").fetchall()}
        tables = [r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()]
        data = {
            r[0] for t in tables for r in con.execute("SELECT block_id FROM pragma_storage_info(?)", [t]).fetchall()
        }
    finally:
        con.close()
    return sorted(set(range(total)) - meta - data)


def damage(db: Path, block: int) -> None:
    """Overwrite 4 KiB in the middle of ``block`` with distinct words (DuckDB's checksum XORs per-word hashes:
    flipping two equal words the same way would cancel out and go unnoticed)."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        (size,) = con.execute("SELECT block_size FROM pragma_database_size()").fetchone()  # type: ignore[misc]
    finally:
        con.close()
    noise = b"".join(hashlib.sha256(str(i).encode()).digest() for i in range(128))
    with db.open("r+b") as handle:
        handle.seek(HEADER + block * size + size // 2)
        handle.write(noise)
