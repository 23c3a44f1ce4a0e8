"""Two `corewarding train` processes on one run folder: one trains, the other stops at once naming the holder."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from corewarding.config import compose_config
from corewarding.training.local import LocalTrainer


def test_a_second_trainer_on_the_same_run_folder_stops_at_once(artifacts_dir: Path, tmp_path: Path) -> None:
    args = [
        "experiment=tiny_cpu", "method=entropy", f"paths.artifacts_dir={artifacts_dir}", f"paths.runs_dir={tmp_path}",
        "schedule.total_steps=3", "schedule.val_max_samples=4", "grpo.max_response_length=24",
    ]  # fmt: skip
    LocalTrainer(compose_config(args), tmp_path / "warm", progress=False)  # the tiny model and data, built once
    cmd = [sys.executable, "-m", "corewarding.cli", "train", *args]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=240) for p in procs]
    codes = [p.returncode for p in procs]

    assert sorted(codes) == [0, 2], [err[-2000:] for _, err in outs]
    winner, loser = (0, 1) if codes[0] == 0 else (1, 0)
    run_dir = tmp_path / "entropy__tiny__tiny"
    err = outs[loser][1]
    assert "Traceback" not in err
    assert (
        err.strip()
        .splitlines()[-1]
        .startswith(f"error: {run_dir} is in use by another trainer (pid {procs[winner].pid})")
    )
    steps = [json.loads(line)["step"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert steps == [0, 1, 2, 3]
