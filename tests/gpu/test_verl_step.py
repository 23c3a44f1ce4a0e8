"""One verl training step per method on a tiny random-weight model (GPU + vLLM; skipped otherwise).

Each run goes through the real path: ``corewarding train ... backend=verl`` -> verl's RayPPOTrainer with the
plug-ins, vLLM rollouts, FSDP updates, a checkpoint, metrics.jsonl, then ``checkpoint merge``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from corewarding.config import compose_config
from corewarding.training.verl.launch import train_verl
from corewarding.training.verl.merge import merge_checkpoint

pytestmark = [pytest.mark.requires_gpu, pytest.mark.requires_vllm, pytest.mark.slow]

METHODS = [
    "gt_grpo", "majority_voting", "self_certainty", "entropy", "co_rewarding_1", "co_rewarding_2", "co_rewarding_3",
    "co_rewarding_2_frozen_teacher", "majority_voting_rephrased",
]  # fmt: skip


@pytest.fixture()
def fresh_ray() -> Iterator[None]:
    import ray

    yield
    ray.shutdown()  # give the GPU back before the next method's run


def tiny_verl_overrides(method: str, artifacts_dir: Path, runs: Path) -> list[str]:
    return [
        "experiment=tiny_cpu", f"method={method}", "backend=verl", f"paths.artifacts_dir={artifacts_dir}",
        f"paths.runs_dir={runs}", "base_model.tiny.hidden_size=128", "base_model.tiny.num_heads=2",
        "base_model.tiny.sft_steps=300", "schedule.total_steps=1", "schedule.save_freq=1", "schedule.test_freq=1",
        "verl.n_gpus_per_node=1", "verl.gpu_memory_utilization=0.3",
    ]  # fmt: skip


@pytest.mark.parametrize("method", METHODS)
def test_one_verl_step(method: str, artifacts_dir: Path, tmp_path: Path, fresh_ray: None) -> None:
    cfg = compose_config(tiny_verl_overrides(method, artifacts_dir, tmp_path))
    run = train_verl(cfg)
    rows = [json.loads(x) for x in (run.run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1]
    assert 0.0 <= rows[0]["val_accuracy"] <= 1.0
    step = rows[1]
    assert step["grad_norm"] >= 0 and step["lr"] >= 0 and 0 <= step["truncation_rate"] <= 1
    if method in ("entropy", "self_certainty"):  # continuous rewards: advantages, hence gradients, are never all 0
        assert step["grad_norm"] > 0
    for key in ("reward_mean", "label_accuracy", "nonempty_label_rate", "vote_agreement", "entropy_mean", "kl_mean"):
        assert key in step, key
    if method in ("co_rewarding_2", "co_rewarding_3"):
        assert step["ema_rate"] == pytest.approx(0.01)  # step 1 of 1: alpha_start
        assert (run.run_dir / "checkpoints" / "global_step_1" / "teacher" / "rank_0.pt").is_file()
    else:
        assert step["ema_rate"] is None
    if method == "co_rewarding_3":  # each view's label metrics, losses and entropy, named as the local backend's
        views = {f"{t}_pseudo_acc" for t in ("ori", "aug")} | {f"pg_loss_{t}" for t in ("ori", "aug")}
        assert views | {"entropy_mean_ori", "kl_mean_aug"} <= set(step)
    hf = merge_checkpoint(run.run_dir)
    assert (hf / "config.json").is_file() and any(hf.glob("*.safetensors"))
