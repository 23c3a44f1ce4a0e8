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
from corewarding.training.verl.plan import Machine, VerlFacts, model_shape, nearest_existing, plan_cell, this_machine
from corewarding.training.verl.verl_config import to_verl_config

GIB = 2**30
ROOT = Path(__file__).resolve().parents[3]
P8B = 8.19e9  # configs/base_model/qwen3-8b-base.yaml: shape.params_b
V8B, H8B, L8B = 151936, 4096, 36
TOKENS = 512 + 3072  # grpo.max_prompt_length + max_response_length
NNZ_LP, NNZ_MB = 16 * TOKENS, 8 * TOKENS  # one packed log-prob / training micro-batch at full length


PACKED_SDPA = ["verl.attn_implementation=sdpa", "verl.remove_padding=true"]  # the by-hand figures count its mask


def cfg_of(*overrides: str) -> DictConfig:
    return compose_config(["backend=verl", *PACKED_SDPA, *overrides])


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
    """Tiny (197,312 parameters, vocab 1024, hidden 64, 2 layers, tied) on 4 GPUs, 64 + 64 tokens, sdpa."""
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
    entropy = 3 * 512 * 1024 * 4  # verl's chunked entropy: 512 rows (< its 2048-row chunk) x 3 fp32 temporaries
    mask = (4 * 128) ** 2 * 3  # sdpa's packed bool mask + its bf16 bias
    assert plan.phases["old_log_prob"] == pytest.approx((resident + logits + entropy + mask) / GIB)
    assert plan.phases["ref_log_prob"] == pytest.approx((resident + logits + mask) / GIB)  # streamed from the host
    sync = 2 * p + 2048 * 2**20 + 4 * 1024 * 64  # vLLM's bf16 weights + the bucket + the fp32 embedding gathered
    assert plan.phases["weight_sync"] == pytest.approx((resident + sync) / GIB)
    train = 4 * per_dev + 2 * (2 * 128 * 1024 * 2) + 2 * 128 * 64 * 2 * 2 + (2 * 128) ** 2 * 3  # + grads ... + mask
    assert plan.phases["train"] == pytest.approx((resident + train) / GIB)
    assert (plan.gpu_gb, plan.gpu_phase, plan.fits) == (plan.phases["rollout"], "rollout", True)
    # tied: all 4 ranks load the full fp32 model beside their shard; the bf16 reference is pinned by then
    assert plan.host_phases["start_up"] == pytest.approx((2 * p + 4 * 4 * p * 1.25) / GIB)
    assert plan.host_phases["steady"] == pytest.approx(2 * p / GIB)  # the bf16 reference (verl_config), offloaded
    assert plan.host_gb == plan.host_phases["start_up"]
    assert plan.disk_gb == pytest.approx((2 * (4 + 2) * p + 8 * p) / GIB)  # 2 kept x (fp32 + bf16 export) + Adam


def test_qwen3_8b_co_rewarding_2_at_4_gpus_by_hand() -> None:
    plan = plan_cell(cfg_of("method=co_rewarding_2", "base_model=qwen3-8b-base", "dataset=math"))
    per_dev = P8B / 4
    resident = 2 * GIB + 12 * per_dev  # 22.88 GB of actor state per device
    assert plan.phases["rollout"] == pytest.approx((resident + 0.6 * 80 * GIB) / GIB)  # II's script: vLLM at 0.6
    assert plan.phases["rollout"] == pytest.approx(72.88, abs=0.01)
    logits = 16 * TOKENS * V8B * 2  # 16.2 GB of bf16 logits
    mask = NNZ_LP**2 * 3  # 9.19 GB: sdpa's dense (57,344 x 57,344) mask and its bf16 bias
    entropy = 3 * 2048 * V8B * 4  # 3.48 GB: one 2048-row chunk, fp32, x 3
    assert plan.phases["old_log_prob"] == pytest.approx((resident + logits + entropy + mask) / GIB)
    assert plan.phases["old_log_prob"] == pytest.approx(53.78, abs=0.01)
    assert plan.phases["ref_log_prob"] == pytest.approx((resident + logits + mask) / GIB)
    sync = 2 * P8B + 2 * GIB + (4 + 2) * V8B * H8B  # vLLM's weights, the bucket, the embedding in fp32 and cast
    assert plan.phases["weight_sync"] == pytest.approx((resident + sync) / GIB)
    train = 4 * per_dev + 2 * 8 * TOKENS * V8B * 2 + 8 * TOKENS * H8B * L8B * 2 + NNZ_MB**2 * 3
    assert plan.phases["train"] == pytest.approx((resident + train) / GIB)
    assert plan.phases["train"] == pytest.approx(58.91, abs=0.01)
    assert (plan.gpu_phase, plan.fits) == ("rollout", True)
    # host: the fp32 teacher pinned (30.5 GB), then rank 0 loads the untied fp32 model and shards it (38.1 GB)
    assert plan.host_phases == pytest.approx(
        {"start_up": (4 * P8B + 4 * P8B * 1.25) / GIB, "steady": 4 * P8B / GIB, "teacher_save": 8 * P8B / GIB}
    )
    assert plan.host_gb == pytest.approx(68.65, abs=0.01)
    assert plan.disk_gb == pytest.approx((2 * (4 + 4 + 2) * P8B + 8 * P8B) / GIB)  # + the teacher's shards: 213.6
    assert plan.sync_gb_per_step == pytest.approx((4 + 2) * P8B / GIB)  # the actor's fp32 + the teacher's bf16


def test_unchunked_entropy_would_not_fit_the_8b_log_prob_pass() -> None:
    """verl's default (entropy_from_logits_with_chunking: false) keeps softmax and softmax * logits at the logits'
    size: 3 copies of 16.2 GB; the translation turns chunking on, which verl's FSDP engine honours."""
    cfg = cfg_of("method=co_rewarding_2", "base_model=qwen3-8b-base", "dataset=math")
    facts = VerlFacts.of(to_verl_config(cfg, "runs/x"))
    assert facts == VerlFacts.default(cfg) == VerlFacts("fp32", 2048, "fsdp2", 2048, "bfloat16")
    unchunked = plan_cell(cfg, VerlFacts("fp32", 0))
    logits = 16 * TOKENS * V8B * 2
    resident = 2 * GIB + 12 * P8B / 4
    assert unchunked.phases["old_log_prob"] == pytest.approx((resident + 3 * logits + NNZ_LP**2 * 3) / GIB)
    assert (unchunked.gpu_phase, round(unchunked.gpu_gb, 1), unchunked.fits) == ("old_log_prob", 82.8, False)


def test_flash_attention_needs_no_dense_mask() -> None:
    cell = ["method=gt_grpo", "base_model=qwen3-8b-base", "dataset=math"]
    sdpa = plan_cell(cfg_of(*cell)).phases
    flash = plan_cell(cfg_of(*cell, "verl.attn_implementation=flash_attention_2")).phases
    assert sdpa["old_log_prob"] - flash["old_log_prob"] == pytest.approx(57344**2 * 3 / GIB) == 9.1875
    assert sdpa["train"] - flash["train"] == pytest.approx(28672**2 * 3 / GIB)
    assert sdpa["rollout"] == flash["rollout"]


def test_host_memory_counts_fsdp1_gradient_buffers_and_tied_full_loads() -> None:
    """FSDP1's CPUOffload pins a gradient the size of each shard; a tied model is loaded in full on every rank."""
    p4 = 4.02e9  # Qwen3-4B-Base: tied embeddings
    cfg = cfg_of("method=co_rewarding_2", "base_model=qwen3-4b-base", "dataset=math")
    fsdp2 = plan_cell(cfg)
    assert fsdp2.host_phases["start_up"] == pytest.approx((4 * p4 + 4 * 4 * p4 * 1.25) / GIB)  # 89.9 GB
    fsdp1 = plan_cell(cfg, VerlFacts("fp32", 2048, strategy="fsdp"))
    assert fsdp1.host_phases["steady"] - fsdp2.host_phases["steady"] == pytest.approx(4 * p4 / GIB)
    untied = cfg_of("method=co_rewarding_2", "base_model=qwen3-4b-base", "dataset=math")
    untied.base_model.shape.tie_word_embeddings = False
    assert plan_cell(untied).host_phases["start_up"] == pytest.approx((4 * p4 + 4 * p4 * 1.25) / GIB)


def test_vllm_at_0_8_leaves_no_room_for_8b_adam_state_and_offload_makes_it() -> None:
    cell = ["method=gt_grpo", "base_model=qwen3-8b-base", "dataset=math", "verl.gpu_memory_utilization=0.8"]
    plan = plan_cell(cfg_of(*cell))
    assert plan.gpu_gb == pytest.approx((2 * GIB + 12 * P8B / 4) / GIB + 64) and not plan.fits
    assert plan.problems == [
        "needs 88.9 GB of GPU memory per device (its rollout phase), more than verl.gpu_memory_gb=80"
    ]
    offloaded = plan_cell(cfg_of(*cell, "verl.actor_param_offload=true"))
    assert offloaded.fits and offloaded.phases["rollout"] == pytest.approx(66.0)
    steady = (2 + 16) * P8B / GIB  # bf16 reference + fp32 weights, grads, AdamW
    assert offloaded.host_phases["steady"] == offloaded.host_gb == pytest.approx(steady)


def test_self_certainty_chunk_and_the_entropy_take_turns_and_kl_free_runs_have_no_reference() -> None:
    """In verl's log-prob pass the entropy's temporaries are freed before the probe's fp32 chunk is made: the larger
    of the two counts, not their sum."""
    cell = ["base_model=qwen3-8b-base", "dataset=math"]
    certainty = plan_cell(cfg_of("method=self_certainty", *cell)).phases["old_log_prob"]
    entropy = plan_cell(cfg_of("method=entropy", *cell)).phases["old_log_prob"]
    assert certainty == entropy  # 1024 x vocab x 4 x 2 (1.16 GB) < 3 x 2048 x vocab x 4 (3.48 GB)
    whole = plan_cell(cfg_of("method=self_certainty", *cell, "verl.self_certainty_chunk_tokens=0"))
    assert whole.phases["old_log_prob"] - entropy == pytest.approx((NNZ_LP * V8B * 8 - 3 * 2048 * V8B * 4) / GIB)
    assert compose_config([]).verl.self_certainty_chunk_tokens == DEFAULT_CHUNK_TOKENS  # the worker's own default
    no_ref = plan_cell(cfg_of("method=gt_grpo", *cell, "grpo.use_kl_loss=false"))
    assert "ref_log_prob" not in no_ref.phases and no_ref.host_phases["steady"] == 0
    assert no_ref.disk_gb == pytest.approx((2 * 6 + 8) * P8B / GIB)


def test_kept_checkpoints_and_the_limits() -> None:
    cell = ["method=co_rewarding_2", "base_model=qwen3-8b-base", "dataset=math"]
    assert plan_cell(cfg_of(*cell, "++verl.checkpoints_to_keep=3")).disk_gb == pytest.approx(38 * P8B / GIB)
    every = cfg_of(*cell, "++verl.checkpoints_to_keep=null", "schedule.total_steps=90")  # saves at 30, 60, 90
    assert plan_cell(every).disk_gb == pytest.approx(38 * P8B / GIB)
    unbounded = plan_cell(cfg_of(*cell, "++verl.checkpoints_to_keep=null", "verl.disk_gb=500"))
    assert unbounded.disk_gb is None and "disk use is unbounded" in unbounded.problems[0]
    tight = plan_cell(cfg_of(*cell, "verl.host_memory_gb=16", "verl.disk_gb=200"))
    assert tight.problems == [
        "needs 68.6 GB of host memory per node (its start_up), more than verl.host_memory_gb=16",
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
    cfgs = [compose_config([*matrix.overrides, *matrix.train_overrides, *cell.overrides()]) for cell in matrix.cells]
    assert len(cfgs) == 72
    # both of auto's outcomes: packed flash_attention_2 (the image), padded sdpa (no flash-attn: no packed mask, but
    # verl's padded branch keeps an unpadded copy of the logits and an unchunked entropy beside them)
    for flash, log_prob_gb, train_gb in ((True, 45, 57), (False, 75, 74)):
        plans = [plan_cell(cfg, VerlFacts.default(cfg, flash_attn=flash)) for cfg in cfgs]
        for plan in plans:  # host: the tied 4B's Co-rewarding-II/III cells, 4 ranks x fp32 model + fp32 teacher: 89.9
            assert plan.host_gb < 90 and plan.disk_gb is not None and plan.disk_gb < 250, plan.as_dict()
            assert plan.phases["old_log_prob"] < log_prob_gb and plan.phases["train"] < train_gb, plan.as_dict()
        assert [p.cell_id for p in plans if not p.fits] == []
        assert max(p.gpu_gb for p in plans) < 76  # 4 GB of headroom beyond the 2 GB overhead (3B at 0.8: 75.0)


def _dry_run(tmp_path: Path, *overrides: str) -> subprocess.CompletedProcess[str]:
    args = ["method=gt_grpo", "base_model=qwen3-8b-base", "dataset=math", "backend=verl", *PACKED_SDPA, *overrides]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]), "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "corewarding.cli", "train", *args, f"paths.runs_dir={tmp_path}", "--dry-run"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_dry_run_refuses_a_cell_that_does_not_fit_in_one_line(tmp_path: Path) -> None:
    done = _dry_run(tmp_path, "verl.gpu_memory_gb=24", "verl.host_memory_gb=512", "verl.disk_gb=1000")
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        "error: gt_grpo__qwen3-8b-base__math does not fit: needs 58.9 GB of GPU memory per device (its train "
        "phase), more than verl.gpu_memory_gb=24"
    ]
    row = done.stdout.strip().splitlines()[-1].split()
    assert row == ["gt_grpo__qwen3-8b-base__math", "58.9", "53.4", "152.6", "no"]  # host: bf16 ref + rank 0's load
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_dry_run_checks_this_machine_unless_told_other_figures(tmp_path: Path) -> None:
    """With verl.host_memory_gb / verl.disk_gb null the dry run checks the machine it runs on: its memory and the
    free disk of the filesystem that will hold the run folder (its nearest existing parent)."""
    here = this_machine(tmp_path / "runs" / "cell")
    assert here.disk_path == str(tmp_path) == str(nearest_existing(tmp_path / "runs" / "cell"))
    meminfo = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())
    assert here.host_gb == pytest.approx(int(meminfo["MemTotal"].split()[0]) * 1024 / GIB, rel=0.01)
    cell = ["method=gt_grpo", "base_model=qwen3-8b-base", "dataset=math"]
    small = Machine(host_gb=24.0, disk_gb=100.0, disk_path="/data")
    assert plan_cell(cfg_of(*cell), machine=small).problems == [
        "needs 53.4 GB of host memory per node (its start_up), more than this machine's 24.0 GB "
        "(set verl.host_memory_gb=GB to plan for the training nodes instead)",
        "needs 152.6 GB of checkpoint disk, more than the 100.0 GB free under /data "
        "(set verl.disk_gb=GB to plan for the training machine's disk instead)",
    ]
    assert plan_cell(cfg_of(*cell, "verl.host_memory_gb=64", "verl.disk_gb=200"), machine=small).fits
    assert plan_cell(cfg_of(*cell), machine=Machine(64.0, 200.0, "/data")).fits
    if here.host_gb < 53.4:  # this machine cannot hold the cell's start-up: the real CLI says so in one line
        done = _dry_run(tmp_path, "verl.disk_gb=1000")
        assert done.returncode == 2, done.stderr
        [line] = done.stderr.strip().splitlines()
        assert line.startswith("error: gt_grpo__qwen3-8b-base__math does not fit: needs 53.4 GB of host memory")
        assert line.endswith("(set verl.host_memory_gb=GB to plan for the training nodes instead)")


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
