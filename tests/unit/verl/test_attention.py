"""The attention kernel of a verl cell (issue 44): auto takes flash_attention_2 where flash-attn imports and padded
sdpa elsewhere, never packed sdpa unless asked; the translation, the memory plan's mask term, the cost factor and
the dry run follow the choice."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from corewarding.config import ConfigError, compose_config
from corewarding.pipeline.cells import plan_cell
from corewarding.pipeline.dry_run import dry_run, format_dry_run
from corewarding.pipeline.training_cost import attention_factor
from corewarding.training.verl import plan
from corewarding.training.verl.attention import Attention, choose_attention
from corewarding.training.verl.verl_config import to_verl_config

PAPER = ["backend=verl", "base_model=qwen3-8b-base", "dataset=math", "method=gt_grpo"]


def verl_section(kernel: str = "auto", remove_padding: str | bool = "auto") -> OmegaConf:
    return OmegaConf.create({"attn_implementation": kernel, "remove_padding": remove_padding})


@pytest.mark.parametrize(
    ("kernel", "remove_padding", "flash", "chosen", "packed"),
    [
        ("auto", "auto", True, "flash_attention_2", True),
        ("auto", "auto", False, "sdpa", False),  # padded: never packed sdpa by default
        ("auto", True, False, "sdpa", True),  # asked for
        ("auto", False, True, "flash_attention_2", False),
        ("flex_attention", "auto", False, "flex_attention", True),
        ("sdpa", "auto", True, "sdpa", False),  # an explicit kernel is kept, whatever imports
        ("eager", True, True, "eager", True),
        ("flash_attention_2", "auto", False, "flash_attention_2", True),  # the launch refuses it without flash-attn
    ],
)
def test_choice_of_kernel_and_packing(
    kernel: str, remove_padding: str | bool, flash: bool, chosen: str, packed: bool
) -> None:
    got = choose_attention(verl_section(kernel, remove_padding), flash_attn=flash)
    assert (got.kernel, got.packed) == (chosen, packed)
    assert got.name == f"{'packed' if packed else 'padded'} {chosen}"
    assert got.slow_packing == (packed and chosen in ("sdpa", "eager"))


def test_why_says_what_decided() -> None:
    assert "flash-attn imports here" in choose_attention(verl_section(), flash_attn=True).why
    fallback = choose_attention(verl_section(), flash_attn=False).why
    assert "does not import here" in fallback and "perf/attention_bench.py" in fallback  # why not flex
    explicit = choose_attention(verl_section("sdpa", True), flash_attn=True).why
    assert explicit == "verl.attn_implementation=sdpa, verl.remove_padding=true"


def test_translation_carries_the_choice_to_every_model() -> None:
    cfg = compose_config(PAPER)
    image, bare = (to_verl_config(cfg, "runs/x", flash_attn=has).actor_rollout_ref.model for has in (True, False))
    assert (image.override_config.attn_implementation, image.use_remove_padding) == ("flash_attention_2", True)
    assert (bare.override_config.attn_implementation, bare.use_remove_padding) == ("sdpa", False)
    asked = compose_config([*PAPER, "verl.attn_implementation=flex_attention", "verl.remove_padding=false"])
    model = to_verl_config(asked, "runs/x", flash_attn=True).actor_rollout_ref.model
    assert (model.override_config.attn_implementation, model.use_remove_padding) == ("flex_attention", False)


def test_remove_padding_takes_auto_or_a_boolean() -> None:
    with pytest.raises(ConfigError, match=r"verl\.remove_padding='yes': must be auto, true or false"):
        compose_config([*PAPER, "verl.remove_padding=yes"])


def test_the_memory_plan_has_a_dense_mask_term_only_for_sdpa_and_eager() -> None:
    """The train phase's mask: (micro-batch x tokens)^2 x 3 bytes packed, micro-batch x tokens^2 x 3 padded, none for
    the per-sequence kernels (the paper config: micro-batch 8 of 512 + 3,072 tokens)."""
    cfg = compose_config(PAPER)
    shape = plan.model_shape(cfg)
    tokens = 8 * 3584

    def train_gb(kernel: str, packed: bool) -> float:
        facts = plan.VerlFacts(ref_dtype="bf16", entropy_chunk_rows=2048, remove_padding=packed, attn_kernel=kernel)
        return plan.phase_terms(cfg, shape, facts)["train"]

    packed_mask = tokens * tokens * 3 / 2**30  # 2,352 GB: why packed sdpa at 3,584 tokens cannot fit
    padded_mask = 8 * 3584 * 3584 * 3 / 2**30
    assert train_gb("sdpa", True) - train_gb("flex_attention", True) == pytest.approx(packed_mask)
    assert train_gb("eager", True) - train_gb("flash_attention_2", True) == pytest.approx(packed_mask)
    assert train_gb("sdpa", False) - train_gb("flash_attention_2", False) == pytest.approx(padded_mask)
    assert train_gb("flex_attention", True) == train_gb("flash_attention_2", True)
    default = plan.VerlFacts.default(cfg, flash_attn=False)
    assert (default.attn_kernel, default.remove_padding) == ("sdpa", False)
    assert plan.VerlFacts.of(to_verl_config(cfg, "runs/x", flash_attn=True)) == plan.VerlFacts.default(
        cfg, flash_attn=True
    )


def test_the_cost_factor_follows_the_kernel_and_the_model_size() -> None:
    cost = compose_config([], config_name="cost")
    padded, flex = Attention("sdpa", False, ""), Attention("flex_attention", True, "")
    assert attention_factor(cost, padded, 1.7) == (pytest.approx(0.754), "padded sdpa x0.75")
    assert attention_factor(cost, padded, 8.0)[0] == pytest.approx(1.493)
    assert attention_factor(cost, padded, 4.85)[0] == pytest.approx((0.754 + 1.493) / 2)  # halfway in parameters
    assert attention_factor(cost, flex, 0.5)[0] == pytest.approx(0.401)  # the nearer measured shape outside
    assert attention_factor(cost, flex, 14.0)[0] == pytest.approx(0.809)
    flash, source = attention_factor(cost, Attention("flash_attention_2", True, ""), 8.0)
    assert flash == pytest.approx(0.809) and source.endswith("packed flex_attention's figure (not measured)")
    packed_sdpa = attention_factor(cost, Attention("sdpa", True, ""), 3.0)[0]
    assert packed_sdpa == pytest.approx(1.291 + (3.0 - 1.7) / 6.3 * (2.273 - 1.291))
    OmegaConf.set_struct(cost, False)
    del cost.attention.stand_ins["padded eager"]
    with pytest.raises(ConfigError, match=r"configs/cost.yaml: attention has no factor or stand-in for 'padded eager'"):
        attention_factor(cost, Attention("eager", False, ""), 3.0)


def test_the_pipeline_dry_run_names_the_kernel_and_warns_about_packed_sdpa(tmp_path: Path) -> None:
    cell = "gt_grpo__qwen3-8b-base__math"
    asked = plan_cell("paper_v3", cell, ["verl.attn_implementation=sdpa", "verl.remove_padding=true"])
    run = dry_run([asked, plan_cell("paper_v3", cell, [])], tmp_path / "absent.duckdb")
    slow, default = run.cells
    assert slow.attention == "packed sdpa" and slow.attention_why == (
        "verl.attn_implementation=sdpa, verl.remove_padding=true"
    )
    assert default.attention in ("padded sdpa", "packed flash_attention_2")
    # the same steps, priced at each kernel's factor for 8.19B parameters (the 8B figures)
    assert slow.rates is not None and slow.rates.endswith("attention packed sdpa x2.27")
    factor = "padded sdpa x1.49" if default.attention == "padded sdpa" else "packed flash_attention_2 x0.81"
    assert default.rates is not None and default.rates.startswith("generation ") and default.rates.endswith(factor)
    assert slow.steps == default.steps and slow.gpu_hours > default.gpu_hours * 1.1
    text = format_dry_run(run)
    assert "attention: packed sdpa for 1 cells (verl.attn_implementation=sdpa, verl.remove_padding=true)" in text
    assert f"attention: {default.attention} for 1 cells (auto: flash-attn" in text
    assert "warning: 1 cells pack micro-batches into one row through a dense mask" in text
