"""Ctrl-C and SIGTERM of `corewarding pipeline run` at random moments: it exits within seconds, prints how to resume,
leaves no Prefect server behind and nothing Running in its checkout's Prefect database; the next run starts at once
and finishes. Two checkouts running at the same time do not wait on each other."""

from __future__ import annotations

import contextlib
import json
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml

from tests.support.repo import clone_project, dvc_bin

BIN = Path(sys.executable).parent
CELL = "entropy__tiny__tiny"
RESULTS_LINE = "results are in the DuckDB store"  # the run's last words (on stderr: --json keeps stdout for the JSON)
SHORT = "schedule.total_steps=4"  # one checkpoint, one evaluation: the run is what is interrupted, not its length
# The run stops in a few seconds (the figures go to interrupt_figures.json and the test's stderr); the bounds here
# are generous, since a loaded CI machine stretches every step of the cleanup, and only catch a run that hangs.
STOP_BOUND_S = 60
HANG_S = 120
COMMAND = [str(BIN / "corewarding"), "pipeline", "run", "--matrix", "demo", "--cell", CELL, SHORT, "--json"]


def _env(clone: Path) -> dict[str, str]:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    return {**env, "HF_HUB_OFFLINE": "1", "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "PATH": f"{BIN}:{env['PATH']}"}


def _communicate_or_explain(proc: subprocess.Popen[str], clone: Path, moment: object) -> tuple[str, str]:
    """The run's output once it has exited and closed its pipes. Past ``HANG_S`` it is taken for hung: every thread's
    stack (the CLI registers SIGUSR1 with faulthandler) and the processes still working in the checkout go into the
    failure, so a rare hang on a loaded machine says where it was."""
    try:
        return proc.communicate(timeout=HANG_S)
    except subprocess.TimeoutExpired:
        exited = proc.poll()
        if exited is None:
            proc.send_signal(signal.SIGUSR1)
            time.sleep(2)
        holders = []
        for other in psutil.process_iter(["pid", "ppid", "cmdline", "status"]):
            with contextlib.suppress(psutil.Error):
                if other.pid != proc.pid and str(clone) in other.cwd():
                    holders.append(other.info)
                    other.kill()  # one of them may hold the pipes
        proc.kill()
        _, err = proc.communicate(timeout=30)
        pytest.fail(f"no exit in {HANG_S} s after the signal at {moment}; exit code {exited}; processes in the "
                    f"checkout: {holders}\nstderr:\n{err[-6000:]}")  # fmt: skip


def _before_the_handlers(returncode: int | None, sig: signal.Signals, out: str, err: str) -> bool:
    """Python's default action for a signal that came before the command's handlers: death by SIGTERM, or a
    KeyboardInterrupt traceback for SIGINT, after which Python ends itself by SIGINT (-2; exit 1 where it cannot)."""
    if out:
        return False
    if sig == signal.SIGTERM:
        return returncode == -signal.SIGTERM
    return returncode in (1, -signal.SIGINT) and err.rstrip().endswith("KeyboardInterrupt")


def _servers_of(clone: Path) -> list[psutil.Process]:
    """Prefect server processes whose home is this checkout's (found by their environment)."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if "server" in " ".join(proc.info["cmdline"] or []) and proc.environ().get("PREFECT_HOME", "").startswith(
                str(clone)
            ):
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def _unfinished_runs(clone: Path) -> list[tuple[str, str]]:
    """Flow and task runs left Running or Pending in the checkout's own Prefect database."""
    db = clone / ".prefect" / "prefect.db"
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
        rows = []
        for table in ("flow_run", "task_run"):
            rows += con.execute(
                f"SELECT name, state_type FROM {table} WHERE state_type IN ('RUNNING', 'PENDING', 'CANCELLING')"
            ).fetchall()
    return rows


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not dvc_bin().exists():
        pytest.skip("dvc is not installed in this environment")
    return clone_project(tmp_path_factory.mktemp("interrupt"))


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_sigint_and_sigterm_at_random_moments_stop_cleanly_and_the_next_run_finishes(clone: Path) -> None:
    rng = random.Random(13)
    figures = []
    for sig in [signal.SIGINT, signal.SIGTERM] * 5:
        proc = subprocess.Popen(COMMAND, cwd=clone, env=_env(clone), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)  # fmt: skip
        delay = rng.uniform(1.0, 14.0)
        time.sleep(delay)
        if proc.poll() is not None:  # finished before the moment came: nothing to interrupt
            proc.communicate()
            continue
        sent = time.monotonic()
        proc.send_signal(sig)
        out, err = _communicate_or_explain(proc, clone, (sig.name, round(delay, 1)))
        took = time.monotonic() - sent
        assert took < STOP_BOUND_S, (sig.name, delay, took, err[-2000:])
        assert _servers_of(clone) == [], "a Prefect server outlived the run"
        if RESULTS_LINE in err and proc.returncode in (0, -sig):
            continue  # the run had finished; the signal met the interpreter on its way out: nothing to resume
        if _before_the_handlers(proc.returncode, sig, out, err):
            # `pipeline run` sets its handlers before any work; a busy machine can stretch the interpreter's start
            # past the earliest moment, and then Python's default action ends it, with nothing started
            assert "Prefect server" not in err, err[-2000:]
            continue
        figures.append(
            {"signal": sig.name, "after_s": round(delay, 1), "exit_s": round(took, 2), "rc": proc.returncode}
        )
        assert proc.returncode == 128 + sig, (sig.name, delay, out[-1000:], err[-3000:])
        assert "to resume" in err.splitlines()[-1], err[-1000:]
        if (clone / ".prefect" / "prefect.db").is_file():
            assert _unfinished_runs(clone) == [], (sig.name, delay)
    (clone / "interrupt_figures.json").write_text(json.dumps(figures, indent=1))
    print(json.dumps(figures), file=sys.stderr)
    assert len(figures) >= 8  # most moments fell inside the run

    started = time.monotonic()
    done = subprocess.run(COMMAND, cwd=clone, env=_env(clone), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    report = json.loads(done.stdout)  # --json: stdout is the report alone
    assert report["cells"][0]["steps"]["train"] in ("done", "skipped") and report["failed"] == []
    assert time.monotonic() - started < 300
    # It recorded the cell's stages in DVC and changed no tracked file: dvc.lock and params.yaml are the checkout's
    # own record (untracked), and params.yaml's entry now carries the override, so that `dvc repro` reruns this
    # same short cell (a worker in this checkout keeps the parent's code version).
    tracked = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=clone, capture_output=True,
                             text=True, check=True).stdout  # fmt: skip
    assert tracked == "", tracked
    assert f"train@{CELL}:" in (clone / "dvc.lock").read_text()
    entry = yaml.safe_load((clone / "params.yaml").read_text())["cells"][CELL]
    assert SHORT in entry["train_args"], entry


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_two_checkouts_run_at_the_same_time_without_waiting_on_each_other(tmp_path: Path) -> None:
    if not dvc_bin().exists():
        pytest.skip("dvc is not installed in this environment")
    clones = [clone_project(tmp_path / name) for name in ("a", "b")]
    command = [*COMMAND[:-4], "--cell", "gt_grpo__tiny__tiny", SHORT, "--steps", "data,train", "--json"]
    procs = [subprocess.Popen(command, cwd=c, env=_env(c), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for c in clones]  # fmt: skip
    outputs = [p.communicate(timeout=500) for p in procs]
    for proc, (out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, out[-2000:] + err[-3000:]
    windows = []
    for c in clones:
        assert (c / ".prefect" / "prefect.db").is_file()  # each checkout has its own Prefect state
        with sqlite3.connect(f"file:{c / '.prefect' / 'prefect.db'}?mode=ro", uri=True) as con:
            windows.append(con.execute(
                "SELECT min(start_time), max(end_time) FROM flow_run WHERE state_type = 'COMPLETED'"
            ).fetchone())  # fmt: skip
    (a_start, a_end), (b_start, b_end) = windows
    assert a_start < b_end and b_start < a_end  # the two runs overlapped: neither waited for the other
