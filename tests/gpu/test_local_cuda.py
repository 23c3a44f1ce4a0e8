"""The local backend on a CUDA device, every method: the same tiny run as on CPU, with every tensor on the GPU."""

from __future__ import annotations

from pathlib import Path

import pytest

from corewarding import methods
from corewarding.config import compose_config
from corewarding.training.local.trainer import LocalTrainer


@pytest.mark.requires_gpu
@pytest.mark.parametrize("method", methods.names())
def test_local_backend_trains_on_cuda(method: str, artifacts_dir: Path, tmp_path: Path) -> None:
    overrides = [
        "experiment=tiny_cpu", f"method={method}", "device=cuda", f"paths.artifacts_dir={artifacts_dir}",
        f"paths.runs_dir={tmp_path}", "base_model.tiny.sft_steps=300", "schedule.total_steps=2",
    ]  # fmt: skip
    trainer = LocalTrainer(compose_config(overrides), tmp_path / method, progress=False)
    before = next(trainer.policy.parameters()).detach().clone()
    metrics = trainer.train_step(1)
    after = next(trainer.policy.parameters())
    assert after.is_cuda and not bool((after == before).all())
    assert metrics["grad_norm"] > 0 and 0 <= metrics["truncation_rate"] <= 1
