"""dvc.lock survives a broken file, a dvc child killed while it writes the lock, and a Ctrl-C of the pipeline's
process while its dvc child writes it (real DVC in a temporary git repository)."""

from __future__ import annotations

import hashlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest
import yaml

import corewarding
from corewarding.pipeline import dvc

REPO = Path(__file__).resolve().parents[2]
SRC = Path(corewarding.__file__).resolve().parents[1]  # the drivers below import the code under test
STAGES = "stages:\n  ok:\n    cmd: echo made > made.txt\n    outs: [made.txt]\n"


def _repo(tmp_path: Path) -> Path:
    """A git + DVC repository with one stage, reproduced by a dvc of its own (not through run_dvc)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    dvc.run_dvc(repo, "init", "-q")
    (repo / "dvc.yaml").write_text(STAGES)
    env = {**os.environ, "DVC_NO_ANALYTICS": "1"}
    subprocess.run([dvc.dvc_executable(), "repro", "-q"], cwd=repo, env=env, check=True, capture_output=True)
    return repo


def _big_lock(repo: Path, stages: int = 2000) -> bytes:
    """Add records of stages dvc.yaml does not have (DVC keeps them): each rewrite of the lock then takes ~1 s, a
    window in which the test can stop the writer. Returns the lock's bytes."""
    lock = yaml.safe_load((repo / "dvc.lock").read_text())
    for i in range(stages):
        md5 = hashlib.md5(str(i).encode()).hexdigest()
        lock["stages"][f"filler{i:04d}"] = {"cmd": f"echo {i}", "outs": [{"path": f"f{i}", "md5": md5, "size": 2}]}
    (repo / "dvc.lock").write_text(yaml.safe_dump(lock, sort_keys=False))
    return (repo / "dvc.lock").read_bytes()


def _when_writing(lock: Path, find_writer: Callable[[], list[psutil.Process]], act: Callable[[int], None]) -> bool:
    """Wait (up to 60 s) until a dvc process has ``lock`` open for writing, then ``act(its pid)`` at once."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for proc in find_writer():
            try:
                if any(f.path == str(lock) and f.mode != "r" for f in proc.open_files()):
                    act(proc.pid)
                    return True
            except psutil.Error:
                continue
    return False


def _dvc_processes(parent: int) -> list[psutil.Process]:
    try:
        children = psutil.Process(parent).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    return [p for p in children if _is_dvc(p)]


def _is_dvc(proc: psutil.Process) -> bool:
    """Whether a child is a dvc process; one that exited meanwhile (the pipeline's short git calls) is not."""
    try:
        return any("dvc" in part for part in proc.cmdline()[:2])
    except psutil.NoSuchProcess:
        return False


def _ok_md5(lock: Path) -> str:
    return yaml.safe_load(lock.read_text())["stages"]["ok"]["outs"][0]["md5"]


def test_an_empty_dvc_lock_is_moved_aside_and_the_next_run_records_its_stages(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    repo = _repo(tmp_path)
    (repo / "dvc.lock").write_text("")  # as a Ctrl-C during `dvc commit` once left it
    with caplog.at_level(logging.WARNING):
        output = dvc.repro_stages(repo, ["ok"])
    assert "Running stage 'ok'" in output  # no record left: DVC runs the stage again and records it
    assert _ok_md5(repo / "dvc.lock") == hashlib.md5(b"made\n").hexdigest()
    aside = list(repo.glob("dvc.lock.corrupt-*"))
    assert len(aside) == 1 and aside[0].read_bytes() == b""
    assert [r.message for r in caplog.records if "dvc.lock was empty" in r.message and aside[0].name in r.message]

    # Broken again after a call through run_dvc: the copy taken before that call comes back; nothing reruns.
    recorded = (repo / "dvc.lock").read_bytes()
    dvc.run_dvc(repo, "status")
    (repo / "dvc.lock").write_bytes(recorded[: len(recorded) // 2] + b"\n  - [")
    assert "Running stage" not in dvc.repro_stages(repo, ["ok"])
    assert (repo / "dvc.lock").read_bytes() == recorded and len(list(repo.glob("dvc.lock.corrupt-*"))) == 2


def test_a_dvc_commit_killed_while_it_writes_the_lock_leaves_the_lock_as_before(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    before = _big_lock(repo)
    (repo / "made.txt").write_text("changed\n")
    errors: list[BaseException] = []

    def commit() -> None:
        try:
            dvc.run_dvc(repo, "commit", "--force", "ok")
        except dvc.DvcError as exc:
            errors.append(exc)

    thread = threading.Thread(target=commit)
    thread.start()
    killed = _when_writing(repo / "dvc.lock", lambda: _dvc_processes(os.getpid()), lambda pid: os.kill(pid, 9))
    thread.join(60)
    assert killed, "dvc finished before the test could kill it mid-write"
    assert errors and "exit -9" in str(errors[0])
    assert (repo / "dvc.lock").read_bytes() == before  # not cut half-way: the copy of before the call


DRIVER = """
import sys
from pathlib import Path
from corewarding.pipeline.dvc import run_dvc
run_dvc(Path(sys.argv[1]), "commit", "--force", "ok")
"""


def test_ctrl_c_of_our_process_while_dvc_writes_the_lock_lets_the_commit_finish(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    _big_lock(repo, stages=1000)  # the commit ends well within the 5 s an interrupted run waits
    (repo / "made.txt").write_text("changed\n")
    env = {**os.environ, "PYTHONPATH": f"{SRC}:{REPO}"}
    # Its own process group, as a terminal's foreground job: the Ctrl-C below goes to every process in it.
    driver = subprocess.Popen([sys.executable, "-c", DRIVER, str(repo)], env=env, start_new_session=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip
    signalled = _when_writing(
        repo / "dvc.lock", lambda: _dvc_processes(driver.pid), lambda pid: os.killpg(driver.pid, signal.SIGINT)
    )
    out, _ = driver.communicate(timeout=60)
    assert signalled, out[-2000:]
    assert "KeyboardInterrupt" in out  # our process was interrupted ...
    assert _ok_md5(repo / "dvc.lock") == hashlib.md5(b"changed\n").hexdigest(), out[-2000:]  # ... its commit was not
    assert len(yaml.safe_load((repo / "dvc.lock").read_text())["stages"]) == 1001


HOLDER = """
import sys, zc.lockfile
held = zc.lockfile.LockFile(sys.argv[1])
print("held", flush=True)
sys.stdin.read()
"""


def test_a_lock_being_written_by_a_live_dvc_process_is_left_alone(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    (repo / "dvc.lock").write_text("")  # mid-write by a dvc that outlived a killed run: it holds the repo lock
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(repo / ".dvc/tmp/lock")], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with pytest.raises(dvc.DvcLockError, match="Unable to acquire lock"):
            dvc.run_dvc(repo, "status")
        assert (repo / "dvc.lock").read_bytes() == b"" and not list(repo.glob("dvc.lock.corrupt-*"))
    finally:
        holder.communicate("", timeout=30)
    dvc.run_dvc(repo, "status")  # the writer is gone: a lock still broken now is set aside
    assert len(list(repo.glob("dvc.lock.corrupt-*"))) == 1


STAGE_DRIVER = """
import sys
from pathlib import Path
from corewarding.pipeline.dvc import run_dvc
from corewarding.interrupts import interruptible
with interruptible():  # as `pipeline run`: SIGTERM unwinds like Ctrl-C, in this process only
    run_dvc(Path(sys.argv[1]), "repro", "slow")
"""


def test_a_sigterm_during_a_stage_stops_the_stage_and_dvc_ends_cleanly(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    with (repo / "dvc.yaml").open("a") as handle:
        handle.write("  slow:\n    cmd: sleep 30 && echo late > late.txt\n    outs: [late.txt]\n")
    before = (repo / "dvc.lock").read_bytes()
    env = {**os.environ, "PYTHONPATH": f"{SRC}:{REPO}"}
    driver = subprocess.Popen([sys.executable, "-c", STAGE_DRIVER, str(repo)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)  # fmt: skip
    deadline = time.monotonic() + 60
    while not any("sleep" in p.name() for p in psutil.Process(driver.pid).children(recursive=True)):
        assert time.monotonic() < deadline and driver.poll() is None
        time.sleep(0.05)
    sent = time.monotonic()
    driver.send_signal(signal.SIGTERM)  # to our process only: the dvc child and its stage hear of it from us
    out, _ = driver.communicate(timeout=30)
    assert time.monotonic() - sent < 5, out[-2000:]
    assert "Interrupted: interrupted by SIGTERM" in out
    left = [p for p in psutil.process_iter(["cwd", "name"]) if p.info["cwd"] == str(repo)]
    assert left == [], left  # the stage command did not outlive the run (it would write late.txt later)
    assert (repo / "dvc.lock").read_bytes() == before
