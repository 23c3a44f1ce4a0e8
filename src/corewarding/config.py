"""Compose the project's Hydra configuration (configs/) from Python, the CLI and tests."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig, OmegaConf

from corewarding import CHECKOUT
from corewarding.schemas import SECTIONS, ConfigError, EmaConfig, typed

__all__ = [  # ConfigError lives with the typed schemas (bottom floor); every caller imports it from here
    "REPHRASED_SOURCES", "ConfigError", "check_rephrased_source", "compose_config", "config_dir", "load_group_option",
    "needs_rephrased_view", "teacher_dtype_problem", "validate_config",
]  # fmt: skip

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


# Hydra 1.3's own config groups (run folders, logging, launcher, help), which compose() composes and then drops with
# the hydra node: removed up front, they cost nothing (a composition took 0.09 s of CPU with them, 0.06 s without)
HYDRA_OWN = tuple(
    f"~hydra/{group}"
    for group in ("job_logging", "hydra_logging", "help", "hydra_help", "output", "launcher", "sweeper", "env")
)


def compose_config(overrides: Sequence[str] = (), config_name: str = "config") -> DictConfig:
    """Compose configs/<config_name>.yaml with Hydra overrides and resolve every interpolation.

    ``config`` is the training root (validated here); ``data`` is the data pipeline's root.
    """
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        cfg = compose(config_name=config_name, overrides=[*overrides, *HYDRA_OWN])
    if config_name == "config":
        check_rephrased_source(cfg)
    OmegaConf.resolve(cfg)
    if config_name == "config":
        validate_config(cfg)
    return cfg


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


def validate_config(cfg: DictConfig) -> None:
    """Raise ConfigError naming the first key whose value cannot work, before anything expensive starts: every
    section of ``schemas.SECTIONS`` read into its typed schema, then what crosses sections."""
    backend = OmegaConf.select(cfg, "backend")
    if backend not in ("local", "verl"):
        raise ConfigError(f"backend={backend!r}: must be one of local, verl")
    for prefix, schema in SECTIONS.items():
        typed(schema, OmegaConf.select(cfg, prefix), prefix)
    check_rephrased_source(cfg)
    teacher = OmegaConf.select(cfg, "method.teacher")
    if teacher:
        problem = teacher_dtype_problem(teacher.dtype)
        if problem:
            raise ConfigError(problem)
        typed(EmaConfig, teacher.ema, "method.teacher.ema")


def load_group_option(group: str, option: str) -> DictConfig:
    """Read one option file of a config group (e.g. method/gt_grpo) without composing the whole tree."""
    path = config_dir() / group / f"{option}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in (config_dir() / group).glob("*.yaml"))
        raise KeyError(f"unknown {group} {option!r}; known: {', '.join(known)}")
    loaded = OmegaConf.load(path)
    assert isinstance(loaded, DictConfig)
    return loaded
