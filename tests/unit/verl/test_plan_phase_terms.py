"""plan.phase_terms: the per-phase working sets that ``gpu_phases`` adds to what is resident, and verl's padded path
(no remove-padding) that ``perf/memory_plan_check.py`` measured until the CPU run took the packed one; and the opt-in
phase sampler (``phase_memory``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from omegaconf import open_dict

from corewarding.config import compose_config
from corewarding.training.verl import phase_memory
from corewarding.training.verl.plan import GB, VerlFacts, gpu_phases, model_shape, phase_terms

V = 151936


def test_gpu_phases_are_resident_plus_the_terms() -> None:
    cfg = compose_config(["backend=verl", "base_model=qwen3-8b-base", "dataset=math", "method=co_rewarding_2"])
    shape, facts = model_shape(cfg), VerlFacts.default(cfg)
    phases, terms = gpu_phases(cfg, shape, facts), phase_terms(cfg, shape, facts)
    resident = 2.0 + 12 * shape.params / 4 / GB
    assert phases["old_log_prob"] == pytest.approx(resident + terms["old_log_prob"])
    assert phases["ref_log_prob"] == pytest.approx(resident + terms["ref_log_prob"])
    assert phases["train"] == pytest.approx(resident + terms["train"])
    assert terms["save"] == pytest.approx(4 * shape.params / 4 / GB)  # the fp32 teacher's shard, cloned


def test_the_padded_fp32_path_counts_the_unchunked_entropy_and_the_unpadded_copy() -> None:
    cfg = compose_config(
        ["backend=verl", "base_model=tiny-qwen3-vocab", "method=gt_grpo", "experiment=tiny_cpu",
         "grpo.micro_batch_size=4", "grpo.log_prob_micro_batch_size=4", "verl.n_gpus_per_node=2"]
    )  # fmt: skip
    shape = model_shape(cfg)
    assert shape.vocab_size == V
    cpu = VerlFacts(ref_dtype="fp32", entropy_chunk_rows=2048, logits_dtype="float32", remove_padding=False)
    terms = phase_terms(cfg, shape, cpu, log_prob_tokens=100, train_tokens=100)
    logits = 4 * 100 * V * 4 / GB  # one fp32 micro-batch of logits
    mask = 4 * 100 * 100 * 3 / GB
    assert terms["old_log_prob"] == pytest.approx(3 * logits + mask)  # logits, softmax, softmax * logits
    assert terms["ref_log_prob"] == pytest.approx(2 * logits + mask)  # logits and the torch.cat copy
    grads = 4 * shape.params / 2 / GB
    acts = 4 * 100 * 128 * 2 * 2 / GB
    assert terms["train"] == pytest.approx(grads + 4 * logits + acts + mask)
    assert terms["save"] == 0.0  # no teacher


class Worker:
    rank = 1

    @phase_memory.measured("update")
    def update_actor(self, data: object) -> int:
        blob = bytearray(64 * 2**20)  # 64 MiB, touched
        return len(blob)


def test_the_sampler_writes_a_line_only_when_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(phase_memory.ENV, raising=False)
    assert Worker().update_actor({}) == 64 * 2**20
    assert not list(tmp_path.iterdir())
    monkeypatch.setenv(phase_memory.ENV, str(tmp_path))
    Worker().update_actor({})
    (row,) = [json.loads(line) for line in (tmp_path / "rank_1.jsonl").read_text().splitlines()]
    assert row["phase"] == "update" and row["rank"] == 1
    assert row["peak"] - row["start"] >= 60 * 2**20


def test_the_logits_dtype_is_the_engines_mixed_precision_not_fsdp_config_dtype() -> None:
    """verl's FSDP engine computes in ``mixed_precision.param_dtype`` (bf16 when unset) on every platform: the CPU
    run's logits are bf16 too, which is what the memory check measured (3 bf16 copies in the old log-prob pass)."""
    from corewarding.training.verl.verl_config import to_verl_config

    cpu = ["backend=verl", "base_model=tiny-qwen3-vocab", "method=gt_grpo", "experiment=tiny_cpu", "verl.platform=cpu"]
    verl_cfg = to_verl_config(compose_config(cpu), "runs/x")
    assert VerlFacts.of(verl_cfg).logits_dtype == "bfloat16"
    with open_dict(verl_cfg):
        verl_cfg.actor_rollout_ref.actor.fsdp_config.mixed_precision = {"param_dtype": "fp32"}
    assert VerlFacts.of(verl_cfg).logits_dtype == "float32"
