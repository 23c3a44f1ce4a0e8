"""The vLLM evaluation backend on a GPU: the tiny model through vLLM, n samples per problem, seeded per problem."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from corewarding.evaluation.eval_config import benchmark_configs
from corewarding.evaluation.harness import evaluate_targets
from corewarding.evaluation.targets import model_target

pytestmark = [pytest.mark.requires_gpu, pytest.mark.requires_vllm]


def test_vllm_backend_evaluates_the_tiny_benchmark_reproducibly(tmp_path: Path, artifacts_dir: Path) -> None:
    from corewarding.tiny.data import write_tiny_dataset
    from corewarding.tiny.model import build_tiny_model

    model = build_tiny_model(artifacts_dir / "tiny-model-sft300", sft_steps=300)
    write_tiny_dataset(artifacts_dir / "tiny-data", n_train=64, n_test=16, seed=0)
    overrides = [
        f"paths.artifacts_dir={artifacts_dir}", "generation=vllm", "generation.dtype=float32",
        "generation.max_model_len=512", "generation.gpu_memory_utilization=0.3", "chunk_size=8",
    ]  # fmt: skip
    configs = benchmark_configs(["tiny"], overrides)
    target = model_target(str(model))
    first = evaluate_targets([target], configs, tmp_path / "a")
    evaluate_targets([target], configs, tmp_path / "b")
    assert first[0].status == "evaluated"
    samples = pq.read_table(tmp_path / "a" / "eval" / "samples.parquet").to_pylist()
    assert len(samples) == 16 * 4
    assert {s["finish_reason"] for s in samples} <= {"stop", "length"}
    assert all(1 <= s["length"] <= 24 for s in samples)
    # per-problem seeds: a second evaluation samples the same responses
    again = pq.read_table(tmp_path / "b" / "eval" / "samples.parquet").to_pylist()
    assert [s["response"] for s in samples] == [s["response"] for s in again]
