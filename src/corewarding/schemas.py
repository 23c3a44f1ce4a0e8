"""Typed schemas of the config sections: the training config's (``configs/config.yaml``: grpo, optimizer, schedule,
vote, verl, and a method's EMA teacher), the pipeline's cell runs, shared store and alerts (``configs/pipeline.yaml``)
and the evaluation's checker and intervals (``configs/eval.yaml``); each field carries its type, its range and a
one-line doc.

``typed(Schema, cfg.section, "section")`` reads a composed section into a frozen dataclass, or raises ConfigError
with one line naming the key (``optimizer.lr=inf: must be finite and > 0``); a key the schema does not know is an
error too (a typo such as ``grpo.kl_cof`` is never silently ignored). Modules take the typed object, not the whole
config. Bottom floor: nothing of the package is imported here.
"""

from __future__ import annotations

import math
import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from functools import cache
from typing import Any, TypeVar

from omegaconf import Container, DictConfig, OmegaConf

T = TypeVar("T")


class ConfigError(ValueError):
    """A config value that cannot work; the message names the key."""


_KEY = re.compile(r"[A-Za-z0-9_.@/\[\]-]{1,200}")


def without_values(message: str) -> str:
    """A ConfigError's message with only its key and its rule (``optimizer.lr: must be finite and > 0``): what a
    work pool's job run may say, since a value may have been read from the machine's environment."""
    found = _KEY.match(message)
    key = found.group(0) if found else "a config key"
    rule = message.rsplit(": must be ", 1)[1].split(", got ", 1)[0] if ": must be " in message else None
    return f"{key}: must be {rule}" if rule else f"{key}: not valid (the value is not shown for a job run)"


@dataclass(frozen=True)
class Rule:
    """What a value must be: a predicate and the words for it (``finite and > 0``)."""

    ok: Callable[[Any], bool]
    requirement: str


def setting(doc: str, rule: Rule | None = None) -> Any:
    """A schema field: its one-line doc and its range (the type comes from the annotation)."""
    return field(metadata={"doc": doc, "rule": rule})


AT_LEAST_1 = Rule(lambda v: v >= 1, "a whole number >= 1")
POSITIVE = Rule(lambda v: v > 0, "finite and > 0")
NON_NEGATIVE = Rule(lambda v: v >= 0, "finite and >= 0")
AT_LEAST_1_OR_NULL = Rule(lambda v: v >= 1, "a whole number >= 1, or null")
GIGABYTES_OR_NULL = Rule(lambda v: v > 0, "a number > 0 or null (this machine's)")
UNIT_INTERVAL = Rule(lambda v: 0 <= v <= 1, "in [0, 1]")
BETAS = Rule(lambda v: len(v) == 2 and all(0 <= b < 1 for b in v), "two numbers, each in [0, 1)")


def one_of(*choices: str, why: str = "") -> Rule:
    return Rule(lambda v: v in choices, why or f"one of {', '.join(choices)}")


@dataclass(frozen=True)
class GrpoConfig:
    """``grpo``: the GRPO setup every method shares (methods.md section 1.0)."""

    train_batch_size: int = setting("prompts per step (pairs for Co-rewarding-I)", AT_LEAST_1)
    n: int = setting("rollouts per prompt (G)", AT_LEAST_1)
    temperature: float = setting("rollout sampling temperature", Rule(lambda v: v > 0, "> 0"))
    top_p: float = setting("rollout nucleus sampling", Rule(lambda v: 0 < v <= 1, "in (0, 1]"))
    top_k: int = setting("rollout top-k (-1: off)")
    max_prompt_length: int = setting("prompt tokens kept (longer prompts are dropped at load)", AT_LEAST_1)
    max_response_length: int = setting("response tokens generated at most", AT_LEAST_1)
    filter_overlong_prompts: bool = setting("drop prompts over max_prompt_length at load")
    micro_batch_size: int = setting("sequences per forward/backward (gradients accumulate)", AT_LEAST_1)
    log_prob_micro_batch_size: int = setting("sequences per no-grad log-prob forward", AT_LEAST_1)
    clip_ratio_low: float = setting("PPO clip below 1", Rule(lambda v: 0 <= v < 1, "in [0, 1)"))
    clip_ratio_high: float = setting("PPO clip above 1", Rule(lambda v: v >= 0, ">= 0"))
    clip_ratio_c: float = setting("dual clip for negative advantages", Rule(lambda v: v > 1, "> 1"))
    loss_agg_mode: str = setting(
        "how token losses aggregate", one_of("token-mean", why="token-mean (the only mode of the local backend)")
    )
    entropy_coeff: float = setting(
        "entropy bonus", Rule(lambda v: v == 0, "0 (the paper uses no entropy bonus; the local backend has none)")
    )
    use_kl_loss: bool = setting("a KL penalty to the reference (or the teacher) in the loss")
    kl_loss_type: str = setting(
        "the KL estimator", one_of("low_var_kl", why="low_var_kl (the only estimator of the local backend)")
    )
    kl_coef: float = setting("weight of the KL penalty", Rule(lambda v: v >= 0, ">= 0"))
    norm_adv_by_std: bool = setting("divide group advantages by their standard deviation")
    adv_epsilon: float = setting("added to the standard deviation", NON_NEGATIVE)


@dataclass(frozen=True)
class OptimizerConfig:
    """``optimizer``: AdamW with linear warmup, then cosine decay."""

    lr: float = setting("peak learning rate", POSITIVE)
    betas: tuple[float, float] = setting("AdamW betas", BETAS)
    eps: float = setting("AdamW epsilon", POSITIVE)
    weight_decay: float = setting("AdamW decoupled weight decay", NON_NEGATIVE)
    grad_clip: float = setting("largest global gradient norm", POSITIVE)
    warmup_ratio: float = setting("linear warmup over floor(ratio x total steps) steps", UNIT_INTERVAL)
    min_lr_ratio: float = setting("the cosine's floor, as a fraction of lr", UNIT_INTERVAL)
    num_cycles: float = setting("cosine cycles after warmup (0.5: one half cycle down to the floor)", NON_NEGATIVE)


@dataclass(frozen=True)
class ScheduleConfig:
    """``schedule``: how long a run trains, and when it saves and validates."""

    epochs: int = setting("passes over the training set", AT_LEAST_1)
    total_steps: int | None = setting("steps (null: floor(rows / train_batch_size) x epochs)", AT_LEAST_1_OR_NULL)
    save_freq: int = setting("save a checkpoint every this many steps", AT_LEAST_1)
    test_freq: int = setting("validate every this many steps", AT_LEAST_1)
    val_before_train: bool = setting("validate the base model at step 0")
    val_max_samples: int | None = setting("validation problems used (null: all)", AT_LEAST_1_OR_NULL)


@dataclass(frozen=True)
class VoteConfig:
    """``vote``: how answers are compared when votes are counted."""

    canonicalize: str = setting("answer comparison", one_of("exact", "normalized", "math_verify"))
    math_verify_timeout_s: float = setting("seconds per math-verify comparison", Rule(lambda v: v > 0, "> 0"))
    math_verify_workers: int | None = setting(
        "math-verify processes (null: one per core)", Rule(lambda v: v >= 1, "an integer >= 1, or null (one per core)")
    )


@dataclass(frozen=True)
class VerlConfig:
    """``verl``: the cluster shape and engine settings of the GPU backend (backend=verl)."""

    nnodes: int = setting("nodes (> 1 joins the Ray cluster at ray_address)", Rule(lambda v: v >= 1, ">= 1"))
    n_gpus_per_node: int = setting("GPUs per node", Rule(lambda v: v >= 1, ">= 1"))
    platform: str = setting(
        "where verl runs", one_of("cuda", "cpu", why="cuda, or cpu (verl's CPU end-to-end run, make verl-e2e)")
    )
    ray_address: str | None = setting("HEAD:6379 of a running Ray cluster (null: $RAY_ADDRESS)")
    rollout_engine: str = setting("verl's rollout engine", one_of("vllm", "sglang", why="vllm or sglang"))
    tensor_parallel_size: int = setting("GPUs per vLLM engine", AT_LEAST_1)
    gpu_memory_utilization: float = setting("vLLM's share of a GPU's memory", Rule(lambda v: 0 < v <= 1, "in (0, 1]"))
    ref_param_offload: bool = setting("keep the reference (or teacher) on the CPU between uses")
    actor_param_offload: bool = setting("keep the policy on the CPU between uses")
    attn_implementation: str = setting(
        "attention kernel (auto: flash_attention_2 where flash-attn imports, else sdpa)",
        one_of("auto", "flash_attention_2", "flex_attention", "sdpa", "eager"),
    )
    remove_padding: str | bool = setting(
        "pack each micro-batch into one row (auto: only for flash_attention_2 and flex_attention)",
        Rule(lambda v: v in ("auto", True, False), "auto, true or false"),
    )
    view_sum_loss: bool = setting("Co-rewarding-I: sum the two views' token means (the reference's loss)")
    self_certainty_chunk_tokens: int = setting(
        "positions whose logits are upcast at once", Rule(lambda v: v >= 0, "a whole number >= 0 (0: all at once)")
    )
    checkpoints_to_keep: int | None = setting(
        "newest saves kept", Rule(lambda v: v >= 1, "a whole number >= 1, or null to keep every save")
    )
    reward_dump: bool = setting("write every scored row to verl_rewards/step_N.jsonl")
    logger: tuple[str, ...] = setting(
        "verl's trackers",
        Rule(lambda v: "file" in v, "a list of trackers; it must include file (it feeds metrics.jsonl)"),
    )
    overrides: tuple[str, ...] = setting("raw verl overrides applied last")
    gpu_memory_gb: float = setting("memory per GPU the dry run plans for", Rule(lambda v: v > 0, "a number > 0"))
    host_memory_gb: float | None = setting("memory per node (null: this machine's)", GIGABYTES_OR_NULL)
    disk_gb: float | None = setting("disk for the run's checkpoints (null: free disk here)", GIGABYTES_OR_NULL)


@dataclass(frozen=True)
class EmaConfig:
    """``method.teacher.ema``: how fast the Co-rewarding-II teacher follows the policy."""

    enable: bool = setting("update the teacher by EMA")
    update_interval: int = setting("steps between updates", Rule(lambda v: v >= 1, ">= 1"))
    alpha_start: float = setting("the first update's rate", Rule(lambda v: 0 <= v <= 1, "in [0, 1]"))
    alpha_end: float = setting("the last update's rate (cosine between)", Rule(lambda v: 0 <= v <= 1, "in [0, 1]"))


POSITIVE_NUMBER = Rule(lambda v: v > 0, "a number > 0")


@dataclass(frozen=True)
class CellsConfig:
    """``cells`` (configs/pipeline.yaml): the cell runs of a work pool."""

    max_attempts: float = setting("starts of a cell whose worker died, at most", POSITIVE_NUMBER)
    lease_timeout_s: float = setting("a lease older than this is a dead worker's", POSITIVE_NUMBER)
    poll_s: float = setting("how often the parent looks at its cell runs", POSITIVE_NUMBER)


@dataclass(frozen=True)
class StoreConfig:
    """``store`` (configs/pipeline.yaml): the shared artifact store of a work pool."""

    url: str | None = setting("an fsspec URL or path (null or empty: none)")
    dvc_remote: str | None = setting("or a DVC remote's name: its URL + /corewarding")
    sync_interval_s: float = setting("seconds between pushes of a training run", POSITIVE_NUMBER)

    @property
    def configured(self) -> bool:
        """Whether a store is named (an empty string means none, as null does)."""
        return bool(self.url or self.dvc_remote)


ALERT_EVENTS = ("cell_failed", "collapse", "claim_changed")
_BLOCK_NAME = re.compile(r"(?:[a-z0-9-]+/)?[a-z0-9-]+")  # Prefect's rule for block type slugs and document names


@dataclass(frozen=True)
class AlertsConfig:
    """``alerts`` (configs/pipeline.yaml): a message through a Prefect notification block for each failed cell, new
    collapse flag or changed claim verdict (docs/orchestration.md#alerts)."""

    block: str | None = setting(
        "the notification block (null or empty: no alerts)",
        Rule(lambda v: not v or bool(_BLOCK_NAME.fullmatch(v)),
             "<block-type-slug>/<block-name> or a block's name (lowercase letters, digits, dashes; never a URL), "
             "or null"),
    )  # fmt: skip
    events: tuple[str, ...] = setting(
        "what sends a message",
        Rule(lambda v: all(e in ALERT_EVENTS for e in v), f"a list of {', '.join(ALERT_EVENTS)}"),
    )
    claims_file: str | None = setting("the claims whose verdicts are watched (null: configs/claims.yaml)")


@dataclass(frozen=True)
class MathVerifyConfig:
    """``math_verify`` (configs/eval.yaml): the math-verify checker's worker processes."""

    workers: int | None = setting(
        "worker processes (null: one per core)", Rule(lambda v: v >= 1, "an integer >= 1, or null (one per core)")
    )
    timeout_s: float = setting("seconds per comparison before it counts as wrong", Rule(lambda v: v > 0, "> 0"))


@dataclass(frozen=True)
class BootstrapConfig:
    """``bootstrap`` (configs/eval.yaml): the confidence interval of every score."""

    samples: int = setting("resamples of the problems", Rule(lambda v: v >= 0, ">= 0"))
    confidence: float = setting("the interval's coverage", Rule(lambda v: 0 < v < 1, "in (0, 1)"))


SECTIONS: dict[str, type] = {
    "grpo": GrpoConfig,
    "optimizer": OptimizerConfig,
    "schedule": ScheduleConfig,
    "vote": VoteConfig,
    "verl": VerlConfig,
}


@cache
def _hints(schema: type) -> dict[str, Any]:
    return typing.get_type_hints(schema)


def _name(hint: Any) -> str:
    """``int``, ``list[str]``, ``float | None``: a type as the docs write it."""
    return hint.__name__ if isinstance(hint, type) else str(hint).replace("typing.", "")


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _of_type(value: Any, hint: Any) -> bool:
    """Whether ``value`` is of the annotated type (an int counts as a float; a bool never as a number)."""
    if isinstance(hint, types.UnionType):
        return any(_of_type(value, arm) for arm in typing.get_args(hint))
    if hint is type(None):
        return value is None
    origin = typing.get_origin(hint)
    if origin in (list, tuple):
        items = typing.get_args(hint)
        return isinstance(value, list | tuple) and all(_of_type(v, items[0]) for v in value)
    if hint is float:
        return _number(value)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint)


def field_problem(schema: type, name: str, value: Any) -> str | None:
    """What ``value`` of ``schema``'s field ``name`` must be, or None when it is fine."""
    [spec] = [f for f in fields(schema) if f.name == name]
    rule: Rule | None = spec.metadata["rule"]
    hint = _hints(schema)[name]
    optional = isinstance(hint, types.UnionType) and type(None) in typing.get_args(hint)
    requirement = rule.requirement if rule else f"of type {_name(hint)}"  # an optional field's rule says "or null"
    if optional and value is None:
        return None
    if not _of_type(value, hint):
        return requirement
    try:
        good = rule is None or bool(rule.ok(value))
    except TypeError:
        good = False
    return None if good else requirement


def typed(schema: type[T], section: Mapping[str, Any] | DictConfig | None, prefix: str) -> T:
    """The section as a ``schema`` object; ConfigError naming the first key that is missing, unknown, of the wrong
    type or out of range."""
    raw = OmegaConf.to_container(section, resolve=True) if isinstance(section, DictConfig) else dict(section or {})
    if not isinstance(raw, dict):
        raise ConfigError(f"{prefix}: must be a mapping of its keys, got {raw!r}")
    values: dict[str, Any] = {
        str(k): OmegaConf.to_container(v) if isinstance(v, Container) else v for k, v in raw.items()
    }
    known = [f.name for f in fields(schema)]  # type: ignore[arg-type]
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise ConfigError(f"{prefix}.{unknown[0]}: unknown key; {prefix} has {', '.join(known)}")
    for name in known:
        if name not in values:
            raise ConfigError(f"{prefix}.{name}: missing")
        problem = field_problem(schema, name, values[name])
        if problem is not None:
            raise ConfigError(f"{prefix}.{name}={values[name]!r}: must be {problem}")
    hints = _hints(schema)  # type: ignore[arg-type]
    return schema(**{n: tuple(v) if typing.get_origin(hints[n]) is tuple else v for n, v in values.items()})


def section_of(cfg: DictConfig, schema: type[T]) -> T:
    """The composed config's section of ``schema`` (one of ``SECTIONS``), typed: what a module takes instead of
    the whole config."""
    [prefix] = [name for name, known in SECTIONS.items() if known is schema]
    return typed(schema, OmegaConf.select(cfg, prefix), prefix)


def key_problem(key: str, value: Any) -> str | None:
    """``field_problem`` by dotted key (``optimizer.lr``), for the sections of ``SECTIONS``."""
    section, _, name = key.partition(".")
    return field_problem(SECTIONS[section], name, value)


def describe(schema: type) -> list[tuple[str, str, str, str]]:
    """(field, type, range, doc) of each field: the schema as a table for the docs and ``config show``."""
    hints = _hints(schema)
    rows = []
    for spec in fields(schema):
        rule = spec.metadata["rule"]
        hint = hints[spec.name]
        rows.append((spec.name, _name(hint), rule.requirement if rule else "", spec.metadata["doc"]))
    return rows
