"""Our config -> verl's ppo_trainer config: values land on verl's own keys, unknown keys and unsupported values
are errors naming the key, and the CLI shows, validates (--dry-run) and snapshots it without a GPU.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from corewarding.cli import main
from corewarding.config import ConfigError, compose_config
from corewarding.training.verl.attention import choose_attention
from corewarding.training.verl.snapshot import default_dir
from corewarding.training.verl.verl_config import apply, to_verl_config, verl_base_config

PAPER = ["base_model=qwen3-8b-base", "dataset=math"]


def verl_of(*overrides: str, run_dir: str = "runs/x") -> OmegaConf:
    return to_verl_config(compose_config([*PAPER, *overrides]), run_dir)


def test_paper_values_land_on_verls_keys() -> None:
    v = verl_of("method=co_rewarding_2")
    a, r = v.actor_rollout_ref.actor, v.actor_rollout_ref.rollout
    assert (v.data.train_batch_size, a.ppo_mini_batch_size, r.n) == (128, 128, 8)  # one optimizer step per step
    assert (v.data.max_prompt_length, v.data.max_response_length, v.data.seed) == (512, 3072, 1234)
    assert (a.optim.lr, a.optim.lr_warmup_steps_ratio, a.optim.lr_scheduler_type) == (3e-6, 0.1, "cosine")
    assert a.optim.override_optimizer_config == {"eps": 1e-8} and list(a.optim.betas) == [0.9, 0.999]
    assert (a.use_kl_loss, a.kl_loss_coef, a.kl_loss_type, a.clip_ratio_c) == (True, 0.001, "low_var_kl", 3.0)
    assert (a.ppo_micro_batch_size_per_gpu, r.log_prob_micro_batch_size_per_gpu) == (8, 16)
    assert (r.name, r.gpu_memory_utilization, r.val_kwargs.temperature, r.val_kwargs.do_sample) == (
        "vllm",
        0.6,
        0,
        False,
    )
    assert v.actor_rollout_ref.ref.fsdp_config.model_dtype == "fp32"  # the fp32 EMA teacher
    assert v.actor_rollout_ref.ref.fsdp_config.param_offload is True and v.actor_rollout_ref.corewarding_teacher
    assert (v.algorithm.adv_estimator, v.algorithm.use_kl_in_reward, v.critic.enable) == ("grpo", False, False)
    assert v.reward.reward_manager.name == "corewarding_gt"
    assert (v.trainer.total_epochs, v.trainer.save_freq, v.trainer.test_freq, v.trainer.n_gpus_per_node) == (
        3,
        30,
        10,
        4,
    )
    assert (
        v.trainer.default_local_dir == "runs/x/checkpoints" and v.data.train_files == "runs/x/verl_data/train.parquet"
    )
    assert v.trainer.experiment_name == "co_rewarding_2__qwen3-8b-base__math"
    assert v.ray_kwargs.ray_init.runtime_env.env_vars.VERL_USE_EXTERNAL_MODULES == "corewarding.training.verl.plugins"
    cw = v.corewarding
    assert (cw.reward_manager, cw.pairs, cw.method.teacher.ema.alpha_end) == ("corewarding_co_rewarding_2", False, 1e-5)
    # verl's own interpolations follow our values
    assert (r.prompt_length, r.response_length, a.rollout_n) == (512, 3072, 8)


def test_co_rewarding_1_trains_both_views_per_step() -> None:
    v = verl_of("method=co_rewarding_1")
    assert v.data.train_batch_size == 256 and v.actor_rollout_ref.actor.ppo_mini_batch_size == 256
    assert v.corewarding.pairs is True and v.actor_rollout_ref.actor.kl_loss_coef == 0.005
    assert v.actor_rollout_ref.corewarding_teacher is False
    rephrased_only = verl_of("method=majority_voting_rephrased")
    assert rephrased_only.data.train_batch_size == 128 and rephrased_only.corewarding.pairs is False


def test_worker_switches_reference_dtype_attention_and_checkpoint_keep_count() -> None:
    pairs, single, teacher = (
        verl_of("method=co_rewarding_1"),
        verl_of("method=gt_grpo"),
        verl_of("method=co_rewarding_2"),
    )
    arr = [v.actor_rollout_ref for v in (pairs, single, teacher)]
    assert [a.corewarding_view_sum_loss for a in arr] == [True, False, False]  # the reference's per-view sum
    assert (
        verl_of("method=co_rewarding_1", "verl.view_sum_loss=false").actor_rollout_ref.corewarding_view_sum_loss
        is False
    )
    assert [a.corewarding_self_certainty_chunk_tokens for a in arr] == [1024] * 3
    assert (
        verl_of("method=self_certainty", "verl.self_certainty_chunk_tokens=256").actor_rollout_ref[
            "corewarding_self_certainty_chunk_tokens"
        ]
        == 256
    )
    assert [a.ref.fsdp_config.model_dtype for a in arr] == ["bf16", "bf16", "fp32"]  # the teacher keeps its own
    # auto's kernel and packing: tests/unit/verl/test_attention.py; an explicit kernel reaches actor, ref and teacher
    flash = verl_of("method=gt_grpo", "verl.attn_implementation=flash_attention_2")
    assert flash.actor_rollout_ref.model.override_config == {"attn_implementation": "flash_attention_2"}
    assert [v.trainer.max_actor_ckpt_to_keep for v in (pairs, single, teacher)] == [2, 2, 2]
    assert verl_of("method=gt_grpo", "verl.checkpoints_to_keep=null").trainer.max_actor_ckpt_to_keep is None
    with pytest.raises(
        ConfigError, match=r"verl\.attn_implementation='flash': must be one of auto, flash_attention_2, flex"
    ):
        verl_of("method=gt_grpo", "verl.attn_implementation=flash")
    with pytest.raises(ConfigError, match=r"verl\.checkpoints_to_keep=0: must be a whole number >= 1"):
        verl_of("method=gt_grpo", "verl.checkpoints_to_keep=0")


def test_vllm_takes_less_of_the_device_for_7b_and_8b_models() -> None:
    """At 0.8, vLLM leaves no room for a 7B/8B actor's fp32 weights and AdamW state (docs/gpu-plan.md)."""
    fraction = {
        model: verl_of("method=gt_grpo", f"base_model={model}").actor_rollout_ref.rollout.gpu_memory_utilization
        for model in ("qwen3-1.7b-base", "qwen3-4b-base", "qwen2.5-3b", "qwen2.5-7b", "qwen3-8b-base")
    }
    assert fraction == {"qwen3-1.7b-base": 0.8, "qwen3-4b-base": 0.7, "qwen2.5-3b": 0.8, "qwen2.5-7b": 0.6,
                        "qwen3-8b-base": 0.6}  # fmt: skip
    override = verl_of("method=gt_grpo", "verl.gpu_memory_utilization=0.7")  # the command line still wins
    assert override.actor_rollout_ref.rollout.gpu_memory_utilization == 0.7


def test_user_overrides_are_applied_last_and_checked() -> None:
    v = verl_of("method=gt_grpo", 'verl.overrides=["actor_rollout_ref.model.use_remove_padding=false"]')
    assert v.actor_rollout_ref.model.use_remove_padding is False
    with pytest.raises(ConfigError, match=r"no key 'actor_rollout_ref\.actor\.no_such_key'"):
        verl_of("method=gt_grpo", 'verl.overrides=["actor_rollout_ref.actor.no_such_key=1"]')
    v = verl_of("method=gt_grpo", 'verl.overrides=["+trainer.my_tag=abc"]')
    assert v.trainer.my_tag == "abc"


def test_unknown_keys_and_unsupported_values_name_the_key() -> None:
    with pytest.raises(ConfigError, match=r"verl config has no key 'trainer\.nope'"):
        apply(verl_base_config(), {"trainer.nope": 1})
    with pytest.raises(ConfigError, match=r"grpo\.adv_epsilon=0\.001: verl's GRPO uses a fixed 1e-06"):
        verl_of("method=gt_grpo", "grpo.adv_epsilon=0.001")
    with pytest.raises(ConfigError, match=r"verl\.rollout_engine='hf'"):
        verl_of("method=gt_grpo", "verl.rollout_engine=hf")
    with pytest.raises(ConfigError, match="must include file"):
        verl_of("method=gt_grpo", "verl.logger=[console]")


def test_dry_run_validates_with_verl_without_a_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    limits = ["verl.host_memory_gb=512", "verl.disk_gb=4096"]  # a GPU node's, not this machine's
    assert main(["train", *PAPER, "method=co_rewarding_1", "backend=verl", *limits, "--dry-run"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["dry_run"] is True and summary["prompts_per_step"] == 256 and summary["gpus"] == 4
    assert "batch reward manager CoRewarding1RewardManager" in summary["checks"]
    here = choose_attention(compose_config([*PAPER, "method=co_rewarding_1"]).verl)  # auto, on this machine
    assert summary["attention"] == {"kernel": here.kernel, "packed": here.packed, "why": here.why}
    assert summary["attention"]["why"].startswith("auto: flash-attn")
    assert Path(summary["run_dir"]).is_absolute() and not Path(summary["run_dir"]).exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only refusal")
def test_training_without_a_gpu_stops_before_writing_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["train", *PAPER, "method=gt_grpo", "backend=verl", f"paths.runs_dir={tmp_path}"]
    assert main(args) == 2
    assert "trains on CUDA GPUs and none is visible" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_dry_run_reports_what_verl_rejects(capsys: pytest.CaptureFixture[str]) -> None:
    """verl's own validation runs: 128 prompts x 8 rollouts cannot be split over 3 GPUs."""
    assert main(["train", *PAPER, "method=gt_grpo", "backend=verl", "verl.n_gpus_per_node=3", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "verl rejects the translated config" in err and "must be divisible by minimal possible batch size" in err


def test_config_show_cell_prints_the_resolved_verl_config(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "show", "entropy__qwen3-4b-base__dapo14k"]) == 0
    shown = OmegaConf.create(capsys.readouterr().out)
    assert shown.corewarding.cell_id == "entropy__qwen3-4b-base__dapo14k"
    assert shown.actor_rollout_ref.model.path == "Qwen/Qwen3-4B-Base"
    assert shown.data.train_files == "runs/entropy__qwen3-4b-base__dapo14k/verl_data/train.parquet"
    snapshot = flat(OmegaConf.to_container(OmegaConf.load(default_dir() / "entropy__qwen3-4b-base__dapo14k.yaml")))
    # the snapshot resolves verl.attn_implementation=auto as the GPU image does; config show as this machine does
    here = choose_attention(compose_config(["base_model=qwen3-4b-base"]).verl)
    differ = {
        k
        for k in snapshot.keys() | flat(OmegaConf.to_container(shown)).keys()
        if snapshot.get(k) != flat(OmegaConf.to_container(shown)).get(k)
    }
    attention_keys = {
        k
        for k in snapshot
        if k.startswith("actor_rollout_ref.") and k.endswith(("use_remove_padding", "attn_implementation"))
    }
    assert differ == (set() if (here.kernel, here.packed) == ("flash_attention_2", True) else attention_keys)
    assert shown.actor_rollout_ref.model.override_config.attn_implementation == here.kernel


def flat(tree: object, prefix: str = "") -> dict[str, object]:
    """``{"a.b": value}`` for a nested mapping."""
    if not isinstance(tree, dict) or not tree:
        return {prefix.rstrip("."): tree}
    return {k: v for key, sub in tree.items() for k, v in flat(sub, f"{prefix}{key}.").items()}


def test_config_show_overrides_form_still_prints_ours(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "show", "method=co_rewarding_1", *PAPER]) == 0
    ours = OmegaConf.create(capsys.readouterr().out)
    assert ours.method.name == "co_rewarding_1" and "actor_rollout_ref" not in ours
    assert main(["config", "show", "method=co_rewarding_1", *PAPER, "--verl"]) == 0
    assert OmegaConf.create(capsys.readouterr().out).data.train_batch_size == 256


def test_config_show_rejects_a_bad_cell_id(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "show", "gt_grpo__qwen3-8b-base"]) == 2
    assert "not a cell id" in capsys.readouterr().err
