"""Lock files are opened without following a link and without truncating: a link (or a hard link) planted as the
results store's lock or a run folder's lock is refused with one line, and the file it names keeps its bytes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from corewarding.cli import main
from corewarding.results.store.store import LockFileError, writer
from corewarding.run_folder import LOCK
from corewarding.training.errors import RunWriteError
from corewarding.training.local.run_lock import run_lock

VICTIM = b"ssh-ed25519 AAAAC3Nza my-keyline\n"  # 33 bytes


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    path = tmp_path / "home" / "authorized_keys"
    path.parent.mkdir()
    path.write_bytes(VICTIM)
    assert len(VICTIM) == 33
    return path


def test_a_linked_results_lock_is_refused_and_its_target_keeps_its_bytes(tmp_path: Path, victim: Path) -> None:
    db = tmp_path / "results" / "results.duckdb"
    db.parent.mkdir()
    lock = db.with_name("results.duckdb.lock")
    lock.symlink_to(victim)
    with pytest.raises(LockFileError) as refused, writer(db, timeout=1):
        pass
    assert str(refused.value) == f"{lock}: the lock file is a link; remove it (a lock is never opened through a link)"
    assert victim.read_bytes() == VICTIM and len(victim.read_bytes()) == 33 and not db.exists()


def test_a_dangling_results_lock_link_creates_nothing(tmp_path: Path) -> None:
    db = tmp_path / "results.duckdb"
    target = tmp_path / "home" / ".bashrc"
    db.with_name("results.duckdb.lock").symlink_to(target)
    with pytest.raises(LockFileError, match="is a link"), writer(db, timeout=1):
        pass
    assert not target.exists() and not target.parent.exists()


def test_a_hard_linked_results_lock_is_refused(tmp_path: Path, victim: Path) -> None:
    db = tmp_path / "results.duckdb"
    os.link(victim, db.with_name("results.duckdb.lock"))
    with pytest.raises(LockFileError, match=r"the lock file is a hard link \(2 names\)"), writer(db, timeout=1):
        pass
    assert victim.read_bytes() == VICTIM


def test_ingest_through_the_cli_names_the_linked_lock_in_one_line(
    tmp_path: Path, victim: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no runs/ or data/ here: the ingest has nothing to read, only the lock to take
    db = tmp_path / "r.duckdb"
    db.with_name("r.duckdb.lock").symlink_to(victim)
    assert main(["results", "ingest", "--db", str(db)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: {db}.lock: the lock file is a link; remove it (a lock is never opened through a link)"]
    assert victim.read_bytes() == VICTIM


def test_a_new_results_lock_is_private_and_empty_once_released(tmp_path: Path) -> None:
    db = tmp_path / "results.duckdb"
    with writer(db, timeout=5):
        lock = db.with_name("results.duckdb.lock")
        assert lock.read_text().startswith(f"pid {os.getpid()}: ")
    assert lock.stat().st_mode & 0o777 == 0o600 and lock.read_bytes() == b""


def test_a_linked_run_folder_lock_is_refused_and_its_target_keeps_its_bytes(tmp_path: Path, victim: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / LOCK).symlink_to(victim)
    with pytest.raises(RunWriteError) as refused, run_lock(run_dir):
        pass
    assert str(refused.value) == (
        f"{run_dir / LOCK}: the lock file is a link; remove it (a lock is never opened through a link)"
    )
    assert victim.read_bytes() == VICTIM
    (run_dir / LOCK).unlink()
    os.link(victim, run_dir / LOCK)
    with pytest.raises(RunWriteError, match=r"hard link \(2 names\)"), run_lock(run_dir):
        pass
    assert victim.read_bytes() == VICTIM


def test_a_linked_tiny_model_build_lock_is_refused(tmp_path: Path, victim: Path) -> None:
    from corewarding.tiny.model import _build_lock  # torch: imported when used

    (tmp_path / ".tiny.lock").symlink_to(victim)
    with pytest.raises(RuntimeError, match=r"\.tiny\.lock: the lock file is a link"), _build_lock(tmp_path / "tiny"):
        pass
    assert victim.read_bytes() == VICTIM
