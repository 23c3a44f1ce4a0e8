"""``corewarding results info`` on a store that is damaged, cut short or not DuckDB at all: one ``error:`` line naming
the file and exit 2, never row counts read from half a file, and the file left as it was."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest

from corewarding.cli import main
from corewarding.results.store.store import writer
from tests.support.damaged_store import damage, data_block


@pytest.fixture(scope="module")
def good_store(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """The bytes of a store with 200,000 metric rows (many blocks of column data)."""
    db = tmp_path_factory.mktemp("good") / "r.duckdb"
    with writer(db, timeout=5) as con:
        con.execute("INSERT INTO training_metrics SELECT 'run', 'loss', i, i * 0.5 FROM range(200000) t(i)")
        con.execute("CHECKPOINT")
    return db.read_bytes()


def _half(db: Path) -> None:
    db.write_bytes(db.read_bytes()[: db.stat().st_size // 2])


def _block(db: Path) -> None:
    damage(db, data_block(db, "training_metrics"))


def _broken_view(db: Path) -> None:
    con = duckdb.connect(str(db))
    try:
        con.execute("CREATE TABLE gone (a INTEGER); CREATE VIEW dangling AS SELECT * FROM gone; DROP TABLE gone")
    finally:
        con.close()


def _foreign(db: Path) -> None:
    db.unlink()
    con = duckdb.connect(str(db))
    try:
        con.execute("CREATE TABLE sheet (a INTEGER)")
    finally:
        con.close()


DAMAGE: dict[str, Callable[[Path], object]] = {
    "cut in half": _half,
    "a damaged block": _block,
    "not DuckDB": lambda db: db.write_bytes(b"a spreadsheet, not a database\n" * 1000),
    "empty": lambda db: db.write_bytes(b""),
    "a view over a dropped table": _broken_view,
    "another program's DuckDB file": _foreign,
}


def test_info_on_the_intact_store_prints_its_counts(
    good_store: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "r.duckdb"
    db.write_bytes(good_store)
    assert main(["results", "info", "--db", str(db)]) == 0
    assert json.loads(capsys.readouterr().out)["rows"]["training_metrics"] == 200_000


@pytest.mark.parametrize("how", list(DAMAGE))
def test_info_on_a_damaged_store_is_one_error_line_and_exit_2(
    how: str, good_store: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "r.duckdb"
    db.write_bytes(good_store)
    DAMAGE[how](db)
    before = db.read_bytes()
    assert main(["results", "info", "--db", str(db)]) == 2
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert out == "" and len(lines) == 1 and lines[0].startswith(f"error: {db}: "), err
    assert "store" in lines[0]
    assert db.read_bytes() == before and not db.with_name(db.name + ".wal").exists()
