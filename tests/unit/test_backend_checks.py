"""A backend that cannot run here (vllm on a CPU machine) is one line and exit 2, before any file is touched."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from corewarding.backends import module_missing
from corewarding.data.io import write_parquet_atomic
from corewarding.data.schema import make_row

SRC = Path(__file__).resolve().parents[2] / "src"
VLLM_RUNS_HERE = not module_missing("vllm") and torch.cuda.is_available()
needs_no_vllm = pytest.mark.skipif(VLLM_RUNS_HERE, reason="checks the refusal where vllm cannot run")


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    command = [sys.executable, "-m", "corewarding.cli", *args]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False)


def _one_error_line(stderr: str) -> str:
    assert "Traceback" not in stderr
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, stderr
    return errors[0]


@needs_no_vllm
def test_evaluate_with_vllm_on_cpu_is_one_error_not_a_traceback_per_benchmark(tmp_path: Path) -> None:
    data = tmp_path / "set.parquet"
    write_parquet_atomic([make_row(f"p{i}", gold, i, "test") for i, gold in enumerate(["1", "2"])], data)
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    args = ["--model", str(model), "--out", str(tmp_path / "out"), "--benchmarks", "math500,aime24,amc"]
    settings = ["generation=vllm", f"benchmark.data_file={data}", "benchmark.n=1", "benchmark.metrics=[pass@1]"]

    done = _cli("evaluate", *args, *settings, cwd=tmp_path)

    assert done.returncode == 2
    assert _one_error_line(done.stderr).startswith("error: generation=vllm ")
    assert "failed" not in done.stderr and not (tmp_path / "out").exists()
