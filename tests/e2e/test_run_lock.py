"""Two `corewarding train` processes on one run folder: one trains, the other stops at once naming the holder.

The first trainer is frozen (SIGSTOP) once it holds the lock, so the second always meets a held lock, however the
machine's load spaces the two starts (started together, a fast first run could finish before the second began).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from corewarding.config import compose_config
from corewarding.run_folder import LOCK
from corewarding.training.local.trainer import LocalTrainer

LOCK_WAIT_S = 240  # a hang guard: the first trainer takes its lock within seconds


def test_a_second_trainer_on_the_same_run_folder_stops_at_once(artifacts_dir: Path, tmp_path: Path) -> None:
    args = [
        "experiment=tiny_cpu", "method=entropy", f"paths.artifacts_dir={artifacts_dir}", f"paths.runs_dir={tmp_path}",
        "schedule.total_steps=3", "schedule.val_max_samples=4", "grpo.max_response_length=24",
    ]  # fmt: skip
    LocalTrainer(compose_config(args), tmp_path / "warm", progress=False)  # the tiny model and data, built once
    cmd = [sys.executable, "-m", "corewarding.cli", "train", *args]
    run_dir = tmp_path / "entropy__tiny__tiny"
    lock = run_dir / LOCK

    first_log = tmp_path / "first.log"  # a file, not a pipe: a full pipe would block the trainer before its lock
    with first_log.open("w") as log:
        first = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + LOCK_WAIT_S
        while not (lock.is_file() and lock.read_text().strip() == str(first.pid)):
            assert first.poll() is None, f"the first trainer ended before taking the lock: {first_log.read_text()}"
            assert time.monotonic() < deadline, "the first trainer never took the run folder's lock"
            time.sleep(0.02)
        os.kill(first.pid, signal.SIGSTOP)  # holding the lock, frozen
        second = subprocess.run(cmd, capture_output=True, text=True, timeout=LOCK_WAIT_S)
    finally:
        os.kill(first.pid, signal.SIGCONT)
    first.wait(timeout=LOCK_WAIT_S)

    assert second.returncode == 2, second.stderr[-2000:]
    assert "Traceback" not in second.stderr
    assert (
        second.stderr.strip()
        .splitlines()[-1]
        .startswith(f"error: {run_dir} is in use by another trainer (pid {first.pid})")
    )
    assert first.returncode == 0, first_log.read_text()[-2000:]
    steps = [json.loads(line)["step"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert steps == [0, 1, 2, 3]
