"""`corewarding demo`: all seven methods (ground truth with two seeds) train on the tiny model and a summary table is
printed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from corewarding.cli import main

SEVEN = [
    "gt_grpo", "majority_voting", "self_certainty", "entropy", "co_rewarding_1", "co_rewarding_2", "co_rewarding_3",
]  # fmt: skip


def test_demo_trains_the_seven_methods_and_prints_the_summary(
    artifacts_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    overrides = [f"paths.artifacts_dir={artifacts_dir}", "schedule.total_steps=2", "schedule.val_max_samples=2"]
    assert main(["demo", "--runs-dir", str(tmp_path), *overrides]) == 0
    out = capsys.readouterr().out.splitlines()
    header = out[0].split()
    assert header[:2] == ["method", "steps"] and "seconds" in header
    table = [line.split() for line in out[2:10]]
    assert [row[0] for row in table] == [SEVEN[0], "gt_grpo/seed1", *SEVEN[1:]]  # the demo runs ground truth twice
    assert all(row[1] == "2" for row in table)
    for method in SEVEN:
        run = tmp_path / f"{method}__tiny__tiny"
        steps = [json.loads(x)["step"] for x in (run / "metrics.jsonl").read_text().splitlines()]
        assert steps == [0, 1, 2]
        assert (run / "checkpoints" / "global_step_2" / "model" / "model.safetensors").is_file()
        assert (run / "config.yaml").is_file()
    assert (tmp_path / "gt_grpo__tiny__tiny__seed1" / "checkpoints" / "global_step_2").is_dir()
    gt = next(row for row in table if row[0] == "gt_grpo")
    assert float(gt[2]) > 0  # the warm-started tiny model gets some answers right: rewards are not all zero
