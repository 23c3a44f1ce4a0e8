"""The verl dry run's resource plan: GPU memory per device, host memory and checkpoint disk of a cell, worked out by
hand here for the tiny cell and a Qwen3-8B cell, and the refusal of a cell that cannot fit, through the real CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import DictConfig, open_dict
from transformers import Qwen2Config, Qwen2ForCausalLM

from corewarding.config import ConfigError, compose_config
from corewarding.matrix import load_matrix
from corewarding.methods.logits_rewards import DEFAULT_CHUNK_TOKENS
from corewarding.training.common import training_config_hash
from corewarding.training.verl.plan import model_shape, plan_cell

GIB = 2**30
ROOT = Path(__file__).resolve().parents[3]
P8B = 8.19e9  # configs/base_model/qwen3-8b-base.yaml: shape.params_b
V8B, H8B, L8B = 151936, 4096, 36
TOKENS = 512 + 3072  # grpo.max_prompt_length + max_response_length


def cfg_of(*overrides: str) -> DictConfig:
    return compose_config(["backend=verl", *overrides])


def test_the_tiny_shape_counts_the_tiny_models_parameters() -> None:
    cfg = cfg_of()
    t = cfg.base_model.tiny
    model = Qwen2ForCausalLM(  # tiny_model._build_model's architecture
        Qwen2Config(
            vocab_size=t.vocab_size,
            hidden_size=t.hidden_size,
            intermediate_size=4 * t.hidden_size,
            num_hidden_layers=t.num_layers,
            num_attention_heads=t.num_heads,
            num_key_value_heads=t.num_heads,
            tie_word_embeddings=True,
        )
    )
    assert model_shape(cfg).params == sum(p.numel() for p in model.parameters()) == 197_312


def test_tiny_cell_by_hand() -> None:
    """Tiny (197,312 parameters, vocab 1024, hidden 64, 2 layers) on 4 GPUs, 64 + 64 tokens."""
    cfg = cfg_of(
        "grpo.max_prompt_length=64",
        "grpo.max_response_length=64",
        "grpo.log_prob_micro_batch_size=4",
        "grpo.micro_batch_size=2",
    )
    plan = plan_cell(cfg)
    p, per_dev = 197_312, 197_312 / 4
    resident = 2 * GIB + 12 * per_dev  # overhead + fp32 master + AdamW's two states
    assert plan.phases["rollout"] == pytest.approx((resident + 0.8 * 80 * GIB) / GIB)
    logits = 4 * 128 * 1024 * 2  # log-prob micro-batch x tokens x vocab x bf16
    assert plan.phases["log_prob"] == pytest.approx((resident + 2 * per_dev + logits) / GIB)  # + the bf16 reference
    train = 4 * per_dev + 2 * (2 * 128 * 1024 * 2) + 2 * 128 * 64 * 2 * 2  # grads + logits & grad + checkpoints
    assert plan.phases["train"] == pytest.approx((resident + train) / GIB)
    assert (plan.gpu_gb, plan.gpu_phase, plan.fits) == (plan.phases["rollout"], "rollout", True)
    assert plan.host_gb == pytest.approx(2 * p / GIB)  # the bf16 reference (verl_config), offloaded
    assert plan.disk_gb == pytest.approx((2 * (4 + 2) * p + 8 * p) / GIB)  # 2 kept x (fp32 + bf16 export) + Adam


def test_qwen3_8b_co_rewarding_2_at_4_gpus_by_hand() -> None:
    plan = plan_cell(cfg_of("method=co_rewarding_2", "base_model=qwen3-8b-base", "dataset=math"))
    per_dev = P8B / 4
    resident = 2 * GIB + 12 * per_dev  # 22.88 GB of actor state per device
    assert plan.phases["rollout"] == pytest.approx((resident + 0.6 * 80 * GIB) / GIB)  # II's script: vLLM at 0.6
    assert plan.phases["rollout"] == pytest.approx(72.88, abs=0.01)
    log_prob = 4 * per_dev + 16 * TOKENS * V8B * 2  # the fp32 teacher's shard loaded + 16.2 GB of bf16 logits
    assert plan.phases["log_prob"] == pytest.approx((resident + log_prob) / GIB)
    train = 4 * per_dev + 2 * 8 * TOKENS * V8B * 2 + 8 * TOKENS * H8B * L8B * 2
    assert plan.phases["train"] == pytest.approx((resident + train) / GIB)
    assert plan.phases["train"] == pytest.approx(56.6, abs=0.05)
    assert (plan.gpu_phase, plan.fits) == ("rollout", True)
    assert plan.host_gb == pytest.approx(4 * P8B / GIB)  # the fp32 teacher, pinned on the host: 30.5 GB
    assert plan.disk_gb == pytest.approx((2 * (4 + 4 + 2) * P8B + 8 * P8B) / GIB)  # + the teacher's shards: 213.6


def test_vllm_at_0_8_leaves_no_room_for_8b_adam_state_and_offload_makes_it() -> None:
    cell = ["method=gt_grpo", "base_model=qwen3-8b-base", "dataset=math", "verl.gpu_memory_utilization=0.8"]
    plan = plan_cell(cfg_of(*cell))
    assert plan.gpu_gb == pytest.approx((2 * GIB + 12 * P8B / 4) / GIB + 64) and not plan.fits
    assert plan.problems == [
        "needs 88.9 GB of GPU memory per device (its rollout phase), more than verl.gpu_memory_gb=80"
    ]
    offloaded = plan_cell(cfg_of(*cell, "verl.actor_param_offload=true"))
    assert offloaded.fits and offloaded.phases["rollout"] == pytest.approx(66.0)
    assert offloaded.host_gb == pytest.approx((2 + 16) * P8B / GIB)  # bf16 reference + fp32 weights, grads, AdamW


def test_self_certainty_adds_one_fp32_chunk_and_kl_free_runs_have_no_reference() -> None:
    cell = ["base_model=qwen3-8b-base", "dataset=math"]
    certainty = plan_cell(cfg_of("method=self_certainty", *cell)).phases["log_prob"]
    entropy = plan_cell(cfg_of("method=entropy", *cell)).phases["log_prob"]
    assert certainty - entropy == pytest.approx(1024 * V8B * 4 * 2 / GIB)
    assert compose_config([]).verl.self_certainty_chunk_tokens == DEFAULT_CHUNK_TOKENS  # the worker's own default
    no_ref = plan_cell(cfg_of("method=gt_grpo", *cell, "grpo.use_kl_loss=false"))
    assert no_ref.host_gb == 0 and no_ref.disk_gb == pytest.approx((2 * 6 + 8) * P8B / GIB)


def test_kept_checkpoints_and_the_limits() -> None:
    cell = ["method=co_rewarding_2", "base_model=qwen3-8b-base", "dataset=math"]
    assert plan_cell(cfg_of(*cell, "++verl.checkpoints_to_keep=3")).disk_gb == pytest.approx(38 * P8B / GIB)
    every = cfg_of(*cell, "++verl.checkpoints_to_keep=null", "schedule.total_steps=90")  # saves at 30, 60, 90
    assert plan_cell(every).disk_gb == pytest.approx(38 * P8B / GIB)
    unbounded = plan_cell(cfg_of(*cell, "++verl.checkpoints_to_keep=null", "verl.disk_gb=500"))
    assert unbounded.disk_gb is None and "disk use is unbounded" in unbounded.problems[0]
    tight = plan_cell(cfg_of(*cell, "verl.host_memory_gb=16", "verl.disk_gb=200"))
    assert tight.problems == [
        "needs 30.5 GB of host memory per node, more than verl.host_memory_gb=16",
        "needs 213.6 GB of checkpoint disk, more than verl.disk_gb=200",
    ]
    with pytest.raises(ConfigError, match=r"verl\.gpu_memory_gb=0: must be a number > 0"):
        plan_cell(cfg_of(*cell, "verl.gpu_memory_gb=0"))
    with pytest.raises(ConfigError, match=r"verl\.disk_gb='big': must be a number > 0 or null"):
        plan_cell(cfg_of(*cell, "verl.disk_gb=big"))
    shapeless = cfg_of(*cell)
    with open_dict(shapeless):
        del shapeless.base_model["shape"]
    with pytest.raises(KeyError, match=r"add base_model\.shape .* to configs/base_model/qwen3-8b-base\.yaml"):
        plan_cell(shapeless)


def test_every_paper_cell_fits_4_x_80_gb() -> None:
    """7B/8B cells with vLLM at 0.8 of the device did not (12 bytes per parameter of resident actor state + 64 GB of
    vLLM > 80 GB); their base model configs lower vLLM's fraction to 0.6, and 4B's to 0.7 (77 GB at 0.8). The v3
    paper's Co-rewarding-III cells (an fp32 teacher, as II's) are checked too."""
    matrix = load_matrix("paper_v3")
    plans = [
        plan_cell(compose_config([*matrix.overrides, *matrix.train_overrides, *cell.overrides()]))
        for cell in matrix.cells
    ]
    assert len(plans) == 72
    for plan in plans:
        assert plan.host_gb < 64 and plan.disk_gb is not None and plan.disk_gb < 250, plan.as_dict()
    assert [p.cell_id for p in plans if not p.fits] == []
    assert max(p.gpu_gb for p in plans) < 76  # 4 GB of headroom beyond the 2 GB overhead allowance (3B at 0.8: 75.0)


def test_dry_run_refuses_a_cell_that_does_not_fit_in_one_line(tmp_path: Path) -> None:
    args = [
        "method=gt_grpo",
        "base_model=qwen3-8b-base",
        "dataset=math",
        "backend=verl",
        "verl.gpu_memory_gb=24",
        f"paths.runs_dir={tmp_path}",
        "--dry-run",
    ]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "corewarding.cli", "train", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        "error: gt_grpo__qwen3-8b-base__math does not fit: needs 56.6 GB of GPU memory per device (its train "
        "phase), more than verl.gpu_memory_gb=24"
    ]
    row = done.stdout.strip().splitlines()[-1].split()
    assert row == ["gt_grpo__qwen3-8b-base__math", "56.6", "15.3", "152.6", "no"]  # host: the bf16 reference
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_the_shape_keys_leave_the_training_hash_alone() -> None:
    """base_model.shape is a fact for the plan: a run trained before it existed resumes, the pipeline keeps it."""

    cell = ["method=gt_grpo", "base_model=qwen3-8b-base", "dataset=math"]
    cfg = cfg_of(*cell)
    changed = cfg_of(*cell, "base_model.shape.params_b=9.0")
    assert training_config_hash(cfg) == training_config_hash(changed)
    assert training_config_hash(cfg) != training_config_hash(cfg_of(*cell, "base_model.dtype=float32"))
    with open_dict(cfg):
        del cfg.base_model["shape"]
    assert training_config_hash(cfg) == training_config_hash(changed)  # the hash a run had before the keys
