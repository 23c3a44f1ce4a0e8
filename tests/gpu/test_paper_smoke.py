"""`make gpu-smoke`'s paper check: two verl steps per paper method on the smallest paper model (Qwen3-1.7B-Base) and
MATH, on one GPU, with a small batch, so a lab sees every method's real path (vLLM rollouts, the plug-ins, FSDP updates,
a checkpoint, the rotation) before it spends days on the matrix. About 2-4 minutes per method on one 80 GB GPU.

Needs the Hub (or a filled cache) for the model, and MATH prepared and its released rephrasings imported:
`corewarding data track math math_test`, then
`dvc repro prepare@math prepare@math_test import_rephrased@math`; skipped with that reason otherwise.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from corewarding.config import compose_config
from corewarding.training.verl.launch import train_verl

pytestmark = [pytest.mark.requires_gpu, pytest.mark.requires_vllm, pytest.mark.slow]

PREPARE = "corewarding data track math math_test && dvc repro prepare@math prepare@math_test import_rephrased@math"
PAPER_METHODS = [
    "gt_grpo", "majority_voting", "self_certainty", "entropy", "co_rewarding_1", "co_rewarding_2", "co_rewarding_3",
]  # fmt: skip
SMALL = [
    "base_model=qwen3-1.7b-base", "dataset=math", "backend=verl", "verl.n_gpus_per_node=1",
    "verl.gpu_memory_utilization=0.4", "grpo.train_batch_size=8", "grpo.n=4", "grpo.max_response_length=512",
    "grpo.micro_batch_size=4", "grpo.log_prob_micro_batch_size=8", "schedule.total_steps=2", "schedule.save_freq=1",
    "schedule.test_freq=2", "schedule.val_max_samples=16", "verl.checkpoints_to_keep=1",
]  # fmt: skip


@pytest.fixture()
def fresh_ray() -> Iterator[None]:
    import ray

    yield
    ray.shutdown()  # give the GPU back before the next method's run


@pytest.mark.parametrize("method", PAPER_METHODS)
def test_two_steps_on_the_smallest_paper_model(method: str, tmp_path: Path, fresh_ray: None) -> None:
    cfg = compose_config([f"method={method}", f"paths.runs_dir={tmp_path}", *SMALL])
    needed = [cfg.dataset.train_files, cfg.dataset.val_files]
    if method in ("co_rewarding_1", "co_rewarding_3"):
        needed += [cfg.dataset.original_files, cfg.dataset.rephrased_files]
    missing = [f for f in needed if not Path(f).is_file()]
    if missing:
        pytest.skip(f"needs {', '.join(missing)}: {PREPARE}")
    run = train_verl(cfg)
    rows = [json.loads(x) for x in (run.run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if "reward_mean" in r] == [1, 2]
    assert all(r["grad_norm"] >= 0 for r in rows if "grad_norm" in r)
    checkpoints = run.run_dir / "checkpoints"
    assert sorted(p.name for p in checkpoints.glob("global_step_*")) == ["global_step_2"]  # step 1 rotated away
    assert list((checkpoints / "global_step_2" / "actor").glob("optim_world_size_*_rank_*.pt"))
    assert (checkpoints / "global_step_2" / "teacher").is_dir() == (method in ("co_rewarding_2", "co_rewarding_3"))
