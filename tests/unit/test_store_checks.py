"""A damaged or foreign store, a writer waiting for the lock, non-finite metrics and a full disk: each stops the CLI
with one line and exit 2, and leaves the store as it was."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from corewarding.matrix import load_matrix
from corewarding.results import synthetic
from corewarding.results.ingest.ingestion import ingest
from corewarding.results.ingest.run_folders import find_run_dirs
from tests.support.damaged_store import damage, data_block, full_scan, index_blocks

ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}


def cli(*args: str, timeout: float = 120, preexec: str = "") -> subprocess.CompletedProcess[str]:
    """``corewarding <args>`` in a fresh process (``preexec``: Python run before the CLI's main)."""
    code = f"{preexec}\nimport sys\nfrom corewarding.cli import main\nsys.exit(main(sys.argv[1:]))"
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=timeout, env=ENV, check=False
    )


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture()
def stored(tmp_path: Path) -> tuple[Path, Path]:
    """A store holding one synthetic run, and a second run folder not yet ingested."""
    cells = load_matrix("demo").cells[:2]
    runs, _ = synthetic.write_result_set(tmp_path, cells, synthetic.SyntheticSpec(steps=6, samples_per_benchmark=4))
    first, second = sorted(find_run_dirs(runs))
    db = tmp_path / "store" / "r.duckdb"
    ingest(db, run_dirs=[first])
    return db, second


def assert_one_line_exit_2(result: subprocess.CompletedProcess[str], *needles: str) -> None:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for needle in needles:
        assert needle in lines[0]


def test_a_damaged_block_stops_ingest_and_report(stored: tuple[Path, Path]) -> None:
    db, run = stored
    damage(db, data_block(db, "training_metrics"))
    with pytest.raises(duckdb.Error, match="Corrupt database file"):  # the store really is damaged
        full_scan(db)
    before = digest(db)
    out = db.parent / "report.html"
    ingested = cli("results", "ingest", "--db", str(db), "--run-dir", str(run))
    assert_one_line_exit_2(ingested, f"{db}: the results store is damaged (table training_metrics", "backup")
    reported = cli("report", "--matrix", "demo", "--db", str(db), "--out", str(out))
    assert_one_line_exit_2(reported, f"{db}: the results store is damaged (table training_metrics")
    assert digest(db) == before and not out.exists()
    assert not db.with_name(db.name + ".wal").exists()


def test_a_damaged_index_block_stops_ingest(stored: tuple[Path, Path]) -> None:
    """Reads do not touch a primary-key index; the writer looks each one up before it writes."""
    db, run = stored
    blocks = index_blocks(db)
    assert blocks
    for block in blocks:
        damage(db, block)
    full_scan(db)  # every column reads back: only a write would have found the damage, half-way
    before = digest(db)
    ingested = cli("results", "ingest", "--db", str(db), "--run-dir", str(run))
    assert_one_line_exit_2(ingested, f"{db}: the results store is damaged (table ", "Corrupt database file")
    assert digest(db) == before


def test_a_file_that_is_not_duckdb_stops_ingest_and_report(stored: tuple[Path, Path]) -> None:
    db, run = stored
    db.write_bytes(b"a spreadsheet, not a database\n" * 1000)
    before = digest(db)
    ingested = cli("results", "ingest", "--db", str(db), "--run-dir", str(run))
    assert_one_line_exit_2(ingested, f"{db}: cannot be read as a results store", "not a valid DuckDB database")
    reported = cli("report", "--matrix", "demo", "--db", str(db), "--out", str(db.parent / "report.html"))
    assert_one_line_exit_2(reported, f"{db}: cannot be read as a results store")
    assert digest(db) == before


HOLD = """import sys, time
from corewarding.results.store import store
with store.writer(sys.argv[1]):
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def test_a_waiting_writer_names_the_holder_then_gives_up(stored: tuple[Path, Path]) -> None:
    db, run = stored
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(db), "60"], stdout=subprocess.PIPE, text=True, env=ENV)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        lock = db.with_name(db.name + ".lock")
        assert lock.read_text().startswith(f"pid {holder.pid}: ")
        before = digest(db)
        started = time.monotonic()
        waiting = subprocess.Popen(
            [sys.executable, "-m", "corewarding.cli", "results", "ingest", "--db", str(db), "--run-dir", str(run),
             "--lock-timeout", "5"],
            stderr=subprocess.PIPE, text=True, env=ENV,
        )  # fmt: skip
        assert waiting.stderr is not None
        notice = waiting.stderr.readline()
        noticed = time.monotonic() - started
        rest = waiting.stderr.read()
        waiting.wait(timeout=60)
        ended = time.monotonic() - started
    finally:
        holder.kill()
        holder.wait()
    assert f"{lock}: waiting up to 5 s for another writer (pid {holder.pid}: " in notice
    assert "store.writer" in notice  # the holder's command
    # after 2 s of waiting, and well before it gives up at 5 s (the child's start-up, longer on a busy machine, only
    # shifts both moments, so no upper bound on either)
    assert noticed >= 2.0 and ended - noticed > 1.0, (noticed, ended)
    assert waiting.returncode == 2 and ended >= 5.0, ended
    lines = rest.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {lock}: another writer (pid {holder.pid}: "), rest
    assert digest(db) == before


HOLD_UNTIL_TOLD = """import sys
from corewarding.results.store import store
with store.writer(sys.argv[1]):
    print("held", flush=True)
    sys.stdin.readline()
"""


def test_a_writer_that_waits_then_gets_the_lock_ingests(stored: tuple[Path, Path]) -> None:
    """The holder lets go once the writer says it is waiting (not after a fixed time, which a busy machine can
    outlast before the writer has even started)."""
    db, run = stored
    holder = subprocess.Popen([sys.executable, "-c", HOLD_UNTIL_TOLD, str(db)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=ENV)  # fmt: skip
    code = "import sys\nfrom corewarding.cli import main\nsys.exit(main(sys.argv[1:]))"
    writer = None
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        writer = subprocess.Popen([sys.executable, "-c", code, "results", "ingest", "--db", str(db), "--run-dir",
                                   str(run)], stderr=subprocess.PIPE, text=True, env=ENV)  # fmt: skip
        assert writer.stderr is not None
        notice = writer.stderr.readline()  # its first line: the notice (a hang guard: the test's own timeout)
        assert holder.stdin is not None
        holder.stdin.write("\n")
        holder.stdin.flush()
        holder.wait(timeout=60)
        rest = writer.stderr.read()
        writer.wait(timeout=120)
    finally:
        for proc in (holder, writer):
            if proc is not None and proc.poll() is None:
                proc.kill()
    assert "waiting up to 300 s for another writer" in notice, notice + rest
    assert writer.returncode == 0, rest
    assert db.with_name(db.name + ".lock").read_text() == ""  # released: no stale holder left in it


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_non_finite_metrics_are_refused_naming_file_and_line(stored: tuple[Path, Path], token: str) -> None:
    db, run = stored
    metrics = run / "metrics.jsonl"
    lines = metrics.read_text().splitlines()
    lines[2] = lines[2][:-1] + f', "grad_norm": {token}}}'
    metrics.write_text("\n".join(lines) + "\n")
    before = digest(db)
    result = cli("results", "ingest", "--db", str(db), "--run-dir", str(run))
    shown = {"1e999": "Infinity"}.get(token, token)
    assert_one_line_exit_2(result, f"{metrics}:3: grad_norm={shown} is not a finite number")
    assert digest(db) == before


LIMIT = """import resource, signal
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead of killing us
resource.setrlimit(resource.RLIMIT_FSIZE, ({0}, {0}))
"""


def counts(db: Path) -> tuple[int, int, int]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        row = con.execute(
            "SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM training_metrics), "
            "(SELECT count(*) FROM eval_samples)"
        ).fetchone()
    finally:
        con.close()
    assert row is not None
    return row  # type: ignore[return-value]


def test_a_full_disk_is_one_line_and_the_store_keeps_its_rows(tmp_path: Path) -> None:
    cells = load_matrix("paper").cells
    first, _ = synthetic.write_result_set(tmp_path / "a", cells[:1], synthetic.SyntheticSpec(steps=4))
    more, _ = synthetic.write_result_set(
        tmp_path / "b", cells[1:13], synthetic.SyntheticSpec(steps=200, samples_per_benchmark=300)
    )
    db = tmp_path / "r.duckdb"
    ingest(db, [first])
    old, before = counts(db), digest(db)
    limit = db.stat().st_size + 2**20  # 1 MiB more per file; the WAL needs ~11 MiB
    result = cli("results", "ingest", "--db", str(db), "--runs", str(more), preexec=LIMIT.format(limit))
    assert_one_line_exit_2(result, f"{db}: out of disk space", "File too large", "MiB free in", "needs about")
    assert "cannot rollback" not in result.stderr
    assert counts(db) == old and digest(db) == before  # the store opens, with its rows and bytes as they were
    needed = float(result.stderr.split("needs about ")[1].split(" MiB")[0]) * 2**20
    retry = cli("results", "ingest", "--db", str(db), "--runs", str(more), preexec=LIMIT.format(limit + int(needed)))
    assert retry.returncode == 0, retry.stderr  # the space the line asked for was enough
    assert counts(db)[0] == old[0] + 12
