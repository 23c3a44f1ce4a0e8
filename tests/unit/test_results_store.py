"""The store's schema versions and migrations, and several writer processes at once (no lost, no duplicated rows)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from corewarding.matrix import load_matrix
from corewarding.results import synthetic
from corewarding.results.ingest.ingestion import ingest
from corewarding.results.store import schema, store
from tests.support.old_store import store_at_version

KEYS = {  # table -> the columns that identify a row
    "runs": "run_id",
    "training_metrics": "run_id, metric, step",
    "eval_metrics": "run_id, step, benchmark, checker, metric",
    "eval_samples": "run_id, step, benchmark, problem_id, sample_index",
    "quality_reports": "report_id",
    "quality_rows": "report_id, kind, position",
    "paper_results": "table_name, train_set, model, method, benchmark",
}


def test_a_new_store_gets_the_current_schema_and_migrating_again_does_nothing(tmp_path: Path) -> None:
    with store.writer(tmp_path / "r.duckdb") as con:
        assert schema.current_version(con) == schema.SCHEMA_VERSION
        assert schema.migrate(con) == schema.SCHEMA_VERSION
        assert con.execute("SELECT count(*) FROM schema_version").fetchone() == (schema.SCHEMA_VERSION,)


def test_migrations_upgrade_a_store_in_place_keeping_its_rows(tmp_path: Path) -> None:
    db = tmp_path / "r.duckdb"
    ingest(db)
    nxt = schema.SCHEMA_VERSION + 1
    newer = {
        **schema.MIGRATIONS,
        nxt: ["ALTER TABLE runs ADD COLUMN note VARCHAR", "UPDATE paper_results SET value = value"],
    }
    con = duckdb.connect(str(db))
    try:
        assert schema.migrate(con, newer) == nxt
        assert con.execute("SELECT max(version) FROM schema_version").fetchone() == (nxt,)
        assert con.execute("SELECT count(*) FROM paper_results").fetchone() == (609,)
        assert "note" in [r[0] for r in con.execute("DESCRIBE runs").fetchall()]
    finally:
        con.close()
    # this code reads its own version only: a newer store is refused by readers and writers, with what to do
    with pytest.raises(schema.SchemaError, match=f"newer than this code's v{schema.SCHEMA_VERSION}"), store.writer(db):
        pass
    with pytest.raises(schema.SchemaError, match="upgrade corewarding"), store.reader(db):
        pass


def test_a_failing_migration_leaves_the_store_at_its_version(tmp_path: Path) -> None:
    db = tmp_path / "r.duckdb"
    ingest(db)
    broken = {
        **schema.MIGRATIONS,
        schema.SCHEMA_VERSION + 1: ["ALTER TABLE runs ADD COLUMN note VARCHAR", "SELECT * FROM no_such_table"],
    }
    con = duckdb.connect(str(db))
    try:
        with pytest.raises(duckdb.Error):
            schema.migrate(con, broken)
        assert schema.current_version(con) == schema.SCHEMA_VERSION
        assert "note" not in [r[0] for r in con.execute("DESCRIBE runs").fetchall()]
    finally:
        con.close()


def table_rows(db: Path) -> dict[str, tuple[int, int]]:
    """table -> (rows, distinct keys)."""
    with store.reader(db) as con:
        return {t: con.execute(f"SELECT count(*), count(DISTINCT ({k})) FROM {t}").fetchone() for t, k in KEYS.items()}  # type: ignore[misc]


def test_parallel_writer_processes_neither_lose_nor_duplicate_rows(tmp_path: Path) -> None:
    cells = load_matrix("paper").cells[:6]
    runs, data = synthetic.write_result_set(
        tmp_path, cells, synthetic.SyntheticSpec(steps=20, samples_per_benchmark=40)
    )
    folders = sorted(str(p) for p in runs.iterdir())
    db = tmp_path / "parallel.duckdb"
    subsets = [folders[:4], folders[2:], folders[::2], folders]  # overlapping: the same runs from several writers
    cli = [sys.executable, "-m", "corewarding.cli", "results", "ingest", "--db", str(db), "--data-dir", str(data)]
    reader_loop = (
        "import sys, time\nfrom corewarding.results.store import store\nend = time.time() + 6\nn = 0\n"
        "while time.time() < end:\n"
        "    try:\n        with store.reader(sys.argv[1]) as con: con.execute('SELECT count(*) FROM runs').fetchall()\n"
        "    except FileNotFoundError: pass\n    n += 1\nprint(n)\n"
    )
    procs = [
        subprocess.Popen(
            [*cli, *[a for f in s for a in ("--run-dir", f)]],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp_path,  # runs/ there: named --run-dir options must not pull in the default runs/ folder
        )
        for s in subsets
    ]
    procs.append(
        subprocess.Popen(
            [sys.executable, "-c", reader_loop, str(db)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp_path,
        )
    )
    deadline = time.monotonic() + 240
    for proc in procs:
        out, err = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
        assert proc.returncode == 0, err
    assert int(out.strip()) > 0  # the reader read while writers wrote, without an error
    serial = tmp_path / "serial.duckdb"
    ingest(serial, run_dirs=[Path(f) for f in folders], data_dirs=[data])
    got, expected = table_rows(db), table_rows(serial)
    assert got == expected
    assert all(n == distinct for n, distinct in got.values())  # no duplicates
    assert got["runs"] == (6, 6) and got["eval_samples"][0] == 4 * 7 * 40  # 4 finished runs x 7 benchmarks x 40


def test_a_v6_store_migrates_to_seed_groups_that_read_cell_ids_as_the_matrix_does(tmp_path: Path) -> None:
    from corewarding.matrix import Cell, parse_cell_id

    db = tmp_path / "r.duckdb"
    con = store_at_version(db, 6)
    cells = [Cell("gt_grpo", "tiny", "tiny"), Cell("gt_grpo", "tiny", "tiny", 1), Cell("gt_grpo", "tiny", "tiny", 12)]
    for i, cell in enumerate(cells):
        con.execute(
            "INSERT INTO runs (run_id, cell_id, method, base_model, dataset, status) "
            "VALUES (?, ?, ?, ?, ?, 'finished')",
            [f"r{i}", cell.cell_id, cell.method, cell.base_model, cell.dataset],
        )
    con.close()
    with store.writer(db) as con:
        rows = con.execute("SELECT cell_id, cell_group, seed_index FROM run_seeds ORDER BY run_id").fetchall()
    expected = [(c.cell_id, parse_cell_id(c.cell_id).first_seed.cell_id, parse_cell_id(c.cell_id).seed) for c in cells]
    assert (
        rows
        == expected
        == [
            ("gt_grpo__tiny__tiny", "gt_grpo__tiny__tiny", 0),
            ("gt_grpo__tiny__tiny__seed1", "gt_grpo__tiny__tiny", 1),
            ("gt_grpo__tiny__tiny__seed12", "gt_grpo__tiny__tiny", 12),
        ]
    )
