"""Ctrl-C (or SIGTERM) during `corewarding train`: one line saying how to resume, exit 130 (143), the run recorded as
interrupted (and ingested as such); the same command then resumes and finishes."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from corewarding.config import compose_config
from corewarding.results.ingest.ingestion import ingest
from corewarding.results.store.store import reader


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_ctrl_c_prints_one_line_exits_130_and_marks_the_run_interrupted(
    stop: signal.Signals, artifacts_dir: Path, tmp_path: Path
) -> None:
    args = [
        "experiment=tiny_cpu", "method=entropy", f"paths.artifacts_dir={artifacts_dir}", f"paths.runs_dir={tmp_path}",
        "schedule.total_steps=8", "schedule.save_freq=1", "schedule.val_max_samples=4", "grpo.max_response_length=24",
    ]  # fmt: skip
    compose_config(args)  # fail fast on a bad override before starting a process
    run_dir = tmp_path / "entropy__tiny__tiny"
    cmd = [sys.executable, "-m", "corewarding.cli", "train", *args]
    # A new session, so the signal can go to the whole process group, as a terminal's Ctrl-C does.
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 180
    while not (run_dir / "checkpoints" / "latest").is_file():
        assert proc.poll() is None, f"run ended before it was interrupted: {proc.communicate()[1][-2000:]}"
        assert time.monotonic() < deadline, "no checkpoint within 180 s"
        time.sleep(0.02)
    os.killpg(proc.pid, stop)
    _, err = proc.communicate(timeout=120)

    assert proc.returncode == 128 + stop, err[-3000:]
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    match = re.fullmatch(r"interrupted at step (\d+); run the same command to resume from step (\d+)", last)
    assert match, last
    at, saved = int(match.group(1)), int(match.group(2))
    assert 1 <= saved <= at < 8 and (run_dir / "checkpoints" / f"global_step_{saved}").is_dir()
    record = json.loads((run_dir / "run.json").read_text())
    assert record["status"] == "interrupted" and record["ended_at"] and record["error"] is None

    db = tmp_path / "results.duckdb"
    ingest(db, run_dirs=[run_dir])
    with reader(db) as con:
        assert con.execute("SELECT status FROM runs").fetchall() == [("interrupted",)]

    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    steps = [json.loads(line)["step"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert steps == list(range(9))
    assert json.loads((run_dir / "run.json").read_text())["status"] == "finished"
