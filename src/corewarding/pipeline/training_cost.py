"""What training a cell costs in device time: its steps, and its seconds per step, measured or assumed.

GPU-seconds of one step = responses x (generation passes x GPU-seconds to generate a response + trained passes x
GPU-seconds to score and train on one). Generation uses the audit dry run's throughput (``audit_plan.throughput_of``:
tokens per second per GPU and tokens per response, measured by earlier audits of the base model, else
``configs/audit.yaml``'s assumption); scoring and training use ``configs/cost.yaml``'s rates (a linear fit to a
one-GPU measurement of two model shapes, ``perf/update_rate.py``). A step time that the
results store measured (``ledger.step_times``) replaces both: this cell's, else the same base model's scaled by the
ratio of the two cells' work per step. Each figure says where it came from.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from functools import cache
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from corewarding.config import ConfigError, compose_config
from corewarding.pipeline.audit_plan import generation_phrase, rows_in, throughput_of
from corewarding.pipeline.cells import CellPlan, data_files
from corewarding.pipeline.dry_run_inputs import Measured
from corewarding.rows import get_path
from corewarding.schemas import BaseModelConfig, DatasetConfig, GrpoConfig, ScheduleConfig, section_of, typed
from corewarding.training.common import total_steps
from corewarding.training.verl.attention import Attention
from corewarding.training.verl.plan import checkpoints_kept, model_shape

COST_CONFIG = "configs/cost.yaml"
ASSUMED = f"assumed, not measured ({COST_CONFIG}; docs/gpu-plan.md)"


def passes(config: Mapping[str, Any]) -> tuple[int, int]:
    """(generation passes, trained passes) per step: two views double both; a teacher that samples doubles the
    generation (Co-rewarding-II: policy and teacher; Co-rewarding-III: both, on both views).

    >>> passes({"method": {"views": ["original", "rephrased"], "teacher": {"dtype": "float32"}}})
    (4, 2)
    >>> passes({"method": {"views": ["original"], "teacher": None}})
    (1, 1)
    """
    views = 2 if "rephrased" in (get_path(config, "method.views") or []) else 1
    return views * (2 if get_path(config, "method.teacher") else 1), views


@dataclass(frozen=True)
class Rates:
    """GPU-seconds per token of a response's budget (generation) and of prompt + response (scoring and training)."""

    rollout_s_per_token: float
    update_s_per_token: float
    source: str
    generation_source: str = ""  # which generation rate (``audit_plan.generation_phrase``)


@cache
def _root_grpo() -> GrpoConfig:
    """configs/config.yaml's ``grpo``: what a stored run's config that lacks a key of it ran with."""
    return section_of(compose_config([]), GrpoConfig)


def grpo_of(config: Mapping[str, Any]) -> GrpoConfig:
    """The typed ``grpo`` of a config as a plain mapping (a stored run's may predate a key, or hold one since
    removed): its keys the schema knows, configs/config.yaml's for the rest."""
    known = {f.name for f in fields(GrpoConfig)}
    given = {k: v for k, v in (get_path(config, "grpo") or {}).items() if k in known}
    return typed(GrpoConfig, {**asdict(_root_grpo()), **given}, "grpo")


def step_work(config: Mapping[str, Any], rates: Rates) -> float:
    """GPU-seconds of one training step of ``config`` (also the ratio a measured step time is scaled by)."""
    generated, trained = passes(config)
    g = grpo_of(config)
    responses = g.train_batch_size * g.n
    response, total = g.max_response_length, g.max_prompt_length + g.max_response_length
    return responses * (
        generated * rates.rollout_s_per_token * response + trained * rates.update_s_per_token * total
    )  # fmt: skip


def attention_factor(cost: DictConfig, attention: Attention, billions: float) -> tuple[float, str]:
    """How ``attention`` scales the per-sequence scoring and training rate of a model of ``billions`` parameters
    (``configs/cost.yaml: attention``), and where the figure came from."""
    table = cost.attention
    measured = attention.name in table.factors
    key = attention.name if measured else table.stand_ins.get(attention.name)
    if key not in table.factors:
        raise ConfigError(f"{COST_CONFIG}: attention has no factor or stand-in for {attention.name!r}")
    (low_b, high_b), (low, high) = table.at_billions, table.factors[key]
    t = min(max((billions - float(low_b)) / (float(high_b) - float(low_b)), 0.0), 1.0)
    factor = float(low) + t * (float(high) - float(low))
    return factor, f"{attention.name} x{factor:.2f}" + ("" if measured else f", {key}'s figure (not measured)")


def assumed_rates(
    cfg: DictConfig, cost: DictConfig, audit: DictConfig, seen: dict[str, dict[str, float]], attention: Attention
) -> Rates:
    """The rates of ``cfg``'s base model: generation from the audit's throughput, the rest from configs/cost.yaml
    for its ``attention``."""
    response = section_of(cfg, GrpoConfig).max_response_length
    shape = model_shape(cfg)
    rate = throughput_of(section_of(cfg, BaseModelConfig).name, response, seen, audit, shape.params / 1e9)
    a = cost.assumed
    logits = float(a.update_gpu_s_logits) * shape.vocab_size / float(a.reference_vocab)
    per_pass = float(a.update_gpu_s_per_b) * shape.params / 1e9 + logits  # GPU-s per 1024 responses
    factor, kernel = attention_factor(cost, attention, shape.params / 1e9)
    update = factor * per_pass / (float(a.reference_responses) * float(a.reference_tokens))
    source = f"generation {rate.tokens_per_s:,.0f} tokens/s per GPU: {rate.source}; attention {kernel}"
    return Rates(rate.tokens_per_sample / rate.tokens_per_s / response, update, source, generation_phrase(rate))


def validations(cfg: DictConfig, steps: int) -> int:
    """How often a run validates: every test_freq steps, at the last step, and before training when asked."""
    schedule = section_of(cfg, ScheduleConfig)
    freq = schedule.test_freq
    return steps // freq + (1 if steps % freq else 0) + (1 if schedule.val_before_train else 0)


def saves(cfg: DictConfig, steps: int) -> int:
    """Checkpoints a run of ``steps`` saves: every save_freq steps and at the last step (both backends)."""
    freq = section_of(cfg, ScheduleConfig).save_freq
    return steps // freq + (1 if steps % freq else 0)


def evaluated_checkpoints(cfg: DictConfig, steps: int) -> int:
    """Checkpoints the pipeline's evaluate step finds after training: every save (local), or the
    ``verl.checkpoints_to_keep`` newest of them (verl deletes the older ones as it trains)."""
    saved = saves(cfg, steps)
    kept = checkpoints_kept(cfg) if str(cfg.backend) == "verl" else None
    return saved if kept is None else min(saved, kept)


def validation_rows(cfg: DictConfig, audit: DictConfig) -> int:
    """Problems one validation generates for (greedy, one each): the file's rows, else configs/audit.yaml's count."""
    path = Path(section_of(cfg, DatasetConfig).val_files)
    rows = rows_in(path) if path.is_file() else int(audit.problems.get(path.parent.name) or 0)
    cap = section_of(cfg, ScheduleConfig).val_max_samples
    return min(rows, cap) if cap else rows


def training_steps(plan: CellPlan, cost: DictConfig) -> tuple[int, str]:
    """``schedule.total_steps``, else floor(rows / batch) x epochs, the rows from the prepared file when it is here,
    else configs/cost.yaml's (before the cell's overlong prompts are dropped, which only the file can tell)."""
    cfg = plan.cfg
    grpo, schedule, dataset = (
        section_of(cfg, GrpoConfig),
        section_of(cfg, ScheduleConfig),
        section_of(cfg, DatasetConfig),
    )
    if schedule.total_steps:
        return schedule.total_steps, "schedule.total_steps"
    files = data_files(plan)
    table = cost.paired_rows if files["paired_data"] != files["data"] else cost.rows
    path = Path(files["data"])
    if path.is_file():
        rows, source = rows_in(path), str(path)
    else:
        fallback = table.get(dataset.name)
        if fallback is None:
            raise KeyError(f"{COST_CONFIG}: no row count for data set {dataset.name!r} and {path} is not here")
        rows, source = int(fallback), f"assumed {int(fallback)} rows ({COST_CONFIG}; {path} is not here)"
    batch = grpo.train_batch_size
    steps = total_steps(cfg, rows) if rows >= batch else 0  # too few rows: 0 here, training refuses them
    return steps, f"{rows} // {batch} x {schedule.epochs} epochs ({source})"


def measured_step(
    config: Mapping[str, Any], cell: tuple[str, str, str], backend: str, device_type: str,
    found: Sequence[Measured], rates: Rates,
) -> tuple[float, str] | None:  # fmt: skip
    """Device-seconds per step from the store: this cell's runs, else the same base model's with the same backend
    and device type, each scaled by the ratio of this cell's work per step to its own. None: nothing measured."""
    usable = [m for m in found if (m.backend, m.device_type, m.base_model) == (backend, device_type, cell[1])]
    same = [m for m in usable if (m.method, m.base_model, m.dataset) == cell]
    pool = same or usable
    if not pool:
        return None
    mine = step_work(config, rates)
    ratios = [mine / step_work(m.config, rates) for m in pool]
    exact = [i for i, r in enumerate(ratios) if abs(r - 1) <= 1e-9]
    if exact:  # runs with this cell's work per step win over scaled ones (a smoke run's small steps scale poorly)
        pool, ratios = [pool[i] for i in exact], [1.0] * len(exact)
    steps = sum(m.steps for m in pool)
    seconds = sum(m.steps * m.step_seconds * m.devices * r for m, r in zip(pool, ratios, strict=True)) / steps
    scaled = ", scaled to this cell's work" if any(abs(r - 1) > 1e-9 for r in ratios) else ""
    if same:
        return seconds, f"measured: {steps} steps of this cell{scaled}"
    others = ", ".join(sorted({f"{m.method}/{m.dataset}" for m in pool}))
    return seconds, f"measured: {steps} steps of {cell[1]} ({others}){scaled}"
