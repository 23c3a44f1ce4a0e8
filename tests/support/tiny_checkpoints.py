"""A tiny CPU run with checkpoints at steps 1 and 2, trained once per test module; each test gets its own copy to
damage or tamper with (tests/e2e/test_checkpoint_integrity.py, test_checkpoint_tampering.py: a module imports the
fixtures ``trained`` and ``runs`` by their function names, ``trained_runs`` and ``runs_copy``)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from corewarding.config import compose_config
from corewarding.training.local.trainer import train

CELL = "gt_grpo__tiny__tiny"


def overrides(artifacts: Path, runs: Path) -> list[str]:
    """The two-step run's config: a checkpoint after each step."""
    return [
        "experiment=tiny_cpu", "method=gt_grpo", f"paths.artifacts_dir={artifacts}", f"paths.runs_dir={runs}",
        "schedule.total_steps=2", "schedule.save_freq=1", "schedule.val_max_samples=4", "grpo.max_response_length=24",
    ]  # fmt: skip


def step_dir(runs: Path, step: int) -> Path:
    """The checkpoint folder of ``step``."""
    return runs / CELL / "checkpoints" / f"global_step_{step}"


@pytest.fixture(scope="module", name="trained")
def trained_runs(artifacts_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The runs folder of the two-step run (made once per module; never changed)."""
    runs = tmp_path_factory.mktemp("trained")
    train(compose_config(overrides(artifacts_dir, runs)), progress=False)
    return runs


@pytest.fixture(name="runs")
def runs_copy(trained: Path, tmp_path: Path) -> Path:
    """This test's own copy of the trained runs folder."""
    shutil.copytree(trained, tmp_path / "runs")
    return tmp_path / "runs"
