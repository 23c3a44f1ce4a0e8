"""Compose the project's Hydra configuration (configs/) from Python, the CLI and tests."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig, ListConfig, OmegaConf

from corewarding import CHECKOUT
from corewarding.grading.equivalence import WORKERS_REQUIREMENT, valid_workers

CONFIG_DIR_ENV = "COREWARDING_CONFIG_DIR"


def config_dir() -> Path:
    """The configs/ folder: $COREWARDING_CONFIG_DIR, else ./configs (DVC runs at the repo root), else the repo's."""
    override = os.environ.get(CONFIG_DIR_ENV)
    here = Path.cwd() / "configs"
    if override:
        path = Path(override)
    elif (here / "config.yaml").is_file():
        path = here
    else:
        path = CHECKOUT / "configs"
    if not (path / "config.yaml").is_file():
        raise FileNotFoundError(f"no Hydra config at {path}/config.yaml (set {CONFIG_DIR_ENV})")
    return path


def compose_config(overrides: Sequence[str] = (), config_name: str = "config") -> DictConfig:
    """Compose configs/<config_name>.yaml with Hydra overrides and resolve every interpolation.

    ``config`` is the training root (validated here); ``data`` is the data pipeline's root.
    """
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        cfg = compose(config_name=config_name, overrides=list(overrides))
    if config_name == "config":
        check_rephrased_source(cfg)
    OmegaConf.resolve(cfg)
    if config_name == "config":
        validate_config(cfg)
    return cfg


class ConfigError(ValueError):
    """A config value that cannot work; the message names the key."""


def _finite(v: Any) -> bool:
    """No NaN or infinity anywhere in the value (a list's items included)."""
    if isinstance(v, list):
        return all(_finite(x) for x in v)
    return not isinstance(v, float) or math.isfinite(v)


def _count(v: Any) -> bool:
    """A whole number (not a bool, not 2.5)."""
    return isinstance(v, int) and not isinstance(v, bool)


def _betas(v: Any) -> bool:
    return len(v) == 2 and all(isinstance(b, int | float) and 0 <= b < 1 for b in v)


# (key, predicate, requirement) for values a run cannot work with; a non-finite number fails every check.
_CHECKS: list[tuple[str, Any, str]] = [
    ("backend", lambda v: v in ("local", "verl"), "one of local, verl"),
    ("grpo.train_batch_size", lambda v: _count(v) and v >= 1, "a whole number >= 1"),
    ("grpo.n", lambda v: _count(v) and v >= 1, "a whole number >= 1"),
    ("grpo.micro_batch_size", lambda v: _count(v) and v >= 1, "a whole number >= 1"),
    ("grpo.log_prob_micro_batch_size", lambda v: _count(v) and v >= 1, "a whole number >= 1"),
    ("grpo.temperature", lambda v: v > 0, "> 0"),
    ("grpo.top_p", lambda v: 0 < v <= 1, "in (0, 1]"),
    ("grpo.max_prompt_length", lambda v: _count(v) and v >= 1, "a whole number >= 1"),
    ("grpo.max_response_length", lambda v: _count(v) and v >= 1, "a whole number >= 1"),
    ("grpo.clip_ratio_low", lambda v: 0 <= v < 1, "in [0, 1)"),
    ("grpo.clip_ratio_high", lambda v: v >= 0, ">= 0"),
    ("grpo.clip_ratio_c", lambda v: v > 1, "> 1"),
    ("grpo.kl_coef", lambda v: v >= 0, ">= 0"),
    ("grpo.entropy_coeff", lambda v: v == 0, "0 (the paper uses no entropy bonus; the local backend has none)"),
    ("grpo.loss_agg_mode", lambda v: v == "token-mean", "token-mean (the only mode of the local backend)"),
    ("grpo.kl_loss_type", lambda v: v == "low_var_kl", "low_var_kl (the only estimator of the local backend)"),
    ("optimizer.lr", lambda v: v > 0, "finite and > 0"),
    ("optimizer.betas", _betas, "two numbers, each in [0, 1)"),
    ("optimizer.eps", lambda v: v > 0, "finite and > 0"),
    ("optimizer.weight_decay", lambda v: v >= 0, "finite and >= 0"),
    ("optimizer.warmup_ratio", lambda v: 0 <= v <= 1, "in [0, 1]"),
    ("optimizer.min_lr_ratio", lambda v: 0 <= v <= 1, "in [0, 1]"),
    ("optimizer.num_cycles", lambda v: v >= 0, "finite and >= 0"),
    ("optimizer.grad_clip", lambda v: v > 0, "finite and > 0"),
    ("schedule.save_freq", lambda v: _count(v) and v >= 1, "a whole number >= 1"),
    ("schedule.test_freq", lambda v: _count(v) and v >= 1, "a whole number >= 1"),
    ("schedule.epochs", lambda v: _count(v) and v >= 1, "a whole number >= 1"),
    (
        "vote.canonicalize",
        lambda v: v in ("exact", "normalized", "math_verify"),
        "one of exact, normalized, math_verify",
    ),
    ("vote.math_verify_timeout_s", lambda v: v > 0, "> 0"),
    ("verl.nnodes", lambda v: v >= 1, ">= 1"),
    ("verl.n_gpus_per_node", lambda v: v >= 1, ">= 1"),
    ("verl.platform", lambda v: v in ("cuda", "cpu"), "cuda, or cpu (verl's CPU end-to-end run, make verl-e2e)"),
]


# Where Co-rewarding-I's rephrased view comes from: the paper's released rephrasings, or a fresh rephrasing run.
REPHRASED_SOURCES = ("release", "generate")


def needs_rephrased_view(cfg: DictConfig) -> bool:
    """Whether the method trains on rephrased questions (Co-rewarding-I, the rephrased-voting ablation)."""
    return "rephrased" in cfg.method.views or cfg.method.get("train_on", "original") == "rephrased"


def check_rephrased_source(cfg: DictConfig) -> None:
    """``dataset.rephrased_source``: release or generate (checked before the paths built from it resolve)."""
    source = OmegaConf.select(cfg, "dataset.rephrased_source")
    if source is not None and source not in REPHRASED_SOURCES:
        raise ConfigError(f"dataset.rephrased_source={source!r}: must be one of {', '.join(REPHRASED_SOURCES)}")


def teacher_dtype_problem(dtype: object) -> str | None:
    """Why ``method.teacher.dtype`` cannot work, or None: the EMA teacher must be float32 on both backends.

    Both keep the teacher in its own dtype and update it in place, ``t <- (1 - a) t + a p``. The late-schedule rates
    (``alpha_end`` 1e-5) are far below bfloat16's relative step (2^-8) and float16's (2^-11), so in either the update
    rounds back to the old value and the teacher stops following the policy.
    """
    if str(dtype) == "float32":
        return None
    step = {"bfloat16": "2^-8", "float16": "2^-11"}.get(str(dtype))
    if step:
        return (
            f"method.teacher.dtype={dtype!r}: must be float32: the EMA's late rates (~1e-5 a step) are below "
            f"{dtype}'s rounding step ({step}), so the teacher would stop moving"
        )
    return f"method.teacher.dtype={dtype!r}: must be float32"


def value_problem(key: str, value: Any) -> str | None:
    """What ``value`` of the checked config key ``key`` must be ("finite and > 0"), or None when it is fine; the one
    range check, used for the config and for the optimiser values a checkpoint restores.

    >>> value_problem("optimizer.lr", float("inf")), value_problem("optimizer.lr", 1e-6)
    ('finite and > 0', None)
    """
    ok, requirement = next((ok, req) for name, ok, req in _CHECKS if name == key)
    try:
        good = value is not None and _finite(value) and bool(ok(value))
    except TypeError:
        good = False
    return None if good else str(requirement)


def validate_config(cfg: DictConfig) -> None:
    """Raise ConfigError naming the first key whose value cannot work, before anything expensive starts."""
    for key, _, _ in _CHECKS:
        value = OmegaConf.select(cfg, key)
        if isinstance(value, ListConfig):
            value = OmegaConf.to_container(value)
        requirement = value_problem(key, value)
        if requirement is not None:
            raise ConfigError(f"{key}={value!r}: must be {requirement}")
    for key in ("schedule.total_steps", "schedule.val_max_samples"):
        value = OmegaConf.select(cfg, key)
        if value is not None and not (_count(value) and value >= 1):
            raise ConfigError(f"{key}={value!r}: must be a whole number >= 1, or null")
    workers = OmegaConf.select(cfg, "vote.math_verify_workers")
    if not valid_workers(workers):
        raise ConfigError(f"vote.math_verify_workers={workers!r}: must be {WORKERS_REQUIREMENT}")
    check_rephrased_source(cfg)
    teacher = OmegaConf.select(cfg, "method.teacher")
    if teacher:
        ema = teacher.ema
        if not (0 <= ema.alpha_end <= 1 and 0 <= ema.alpha_start <= 1):
            raise ConfigError(
                f"method.teacher.ema alpha_start/alpha_end={ema.alpha_start}/{ema.alpha_end}: must be in [0, 1]"
            )
        problem = teacher_dtype_problem(teacher.dtype)
        if problem:
            raise ConfigError(problem)
        if ema.update_interval < 1:
            raise ConfigError(f"method.teacher.ema.update_interval={ema.update_interval!r}: must be >= 1")


def load_group_option(group: str, option: str) -> DictConfig:
    """Read one option file of a config group (e.g. method/gt_grpo) without composing the whole tree."""
    path = config_dir() / group / f"{option}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in (config_dir() / group).glob("*.yaml"))
        raise KeyError(f"unknown {group} {option!r}; known: {', '.join(known)}")
    loaded = OmegaConf.load(path)
    assert isinstance(loaded, DictConfig)
    return loaded
