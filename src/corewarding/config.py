"""Compose the project's Hydra configuration (configs/) from Python, the CLI and tests."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig, OmegaConf

from corewarding import CHECKOUT, methods
from corewarding.schemas import (
    DATA_SECTIONS,
    EVAL_SECTIONS,
    SECTIONS,
    BenchmarkConfig,
    ConfigError,
    DatasetConfig,
    MethodConfig,
    section_of,
    typed,
)

__all__ = [  # ConfigError lives with the typed schemas (bottom floor); every caller imports it from here
    "REPHRASED_SOURCES", "ConfigError", "check_rephrased_source", "compose_config", "config_dir", "load_group_option",
    "needs_rephrased_view", "teacher_dtype_problem", "validate_config", "validate_data_config", "validate_eval_config",
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
    validate = ROOT_VALIDATORS.get(config_name)
    if validate is not None:
        try:
            validate(cfg)
        except ConfigError as error:
            raise located(error, overrides, config_name) from None
    return cfg


_FIRST_KEY = re.compile(r"[A-Za-z0-9_.\[\]-]+")


def located(error: ConfigError, overrides: Sequence[str], config_name: str) -> ConfigError:
    """``error`` with the option file its key comes from (``configs/base_model/qwen3-8b-base.yaml:
    base_model.hf_idd: unknown key; ...``) when the key's section is a config group and no override sets the key."""
    found = _FIRST_KEY.match(str(error))
    key = found.group(0) if found else ""
    group = key.split(".", 1)[0]
    overridden = {o.lstrip("+~").split("=", 1)[0] for o in overrides} - {group}  # group=option picks a file
    if not key or any(key == o or key.startswith(f"{o}.") or o.startswith(f"{key}.") for o in overridden):
        return error
    GlobalHydra.instance().clear()  # once, on the error path only: which option of each group was composed
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        hydra = compose(config_name=config_name, overrides=[*overrides, *HYDRA_OWN], return_hydra_config=True).hydra
    option = hydra.runtime.choices.get(group)
    path = config_dir() / group / f"{option}.yaml"
    if option is None or not path.is_file():
        return error
    return ConfigError(f"{shown_path(path)}: {error}")


# Where Co-rewarding-I's rephrased view comes from: the paper's released rephrasings, or a fresh rephrasing run.
REPHRASED_SOURCES = ("release", "generate")


def needs_rephrased_view(cfg: DictConfig) -> bool:
    """Whether the method trains on rephrased questions (Co-rewarding-I, the rephrased-voting ablation)."""
    method = section_of(cfg, MethodConfig)
    return "rephrased" in method.views or method.train_on == "rephrased"


def check_rephrased_source(cfg: DictConfig) -> None:
    """``dataset.rephrased_source``: release or generate (checked before the paths built from it resolve)."""
    source = OmegaConf.select(cfg, "dataset.rephrased_source")  # raw read: before the paths built from it resolve
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
    backend = OmegaConf.select(cfg, "backend")  # raw read: a root key (no section)
    if backend not in ("local", "verl"):
        raise ConfigError(f"backend={backend!r}: must be one of local, verl")
    _read_sections(cfg, SECTIONS)
    check_rephrased_source(cfg)
    check_method(typed(MethodConfig, cfg.method, "method"))


def check_method(method: MethodConfig) -> None:
    """ConfigError naming the key where ``method`` cannot work: an EMA teacher not in float32, a ``reward`` that
    names no registered method, ``views`` other than the registered method's (less the teacher's)."""
    if method.teacher is not None:
        problem = teacher_dtype_problem(method.teacher.dtype)
        if problem:
            raise ConfigError(problem)
    try:
        spec = methods.get(method.reward)
    except KeyError:
        known = ", ".join(methods.names())
        raise ConfigError(f"method.reward={method.reward!r}: must be a registered method; known: {known}") from None
    if sorted(method.views) != sorted(spec.question_views):
        raise ConfigError(
            f"method.views={list(method.views)}: must be {list(spec.question_views)}, the views of the registered "
            f"method {spec.name!r} (its MethodSpec.views less the teacher's)"
        )


def load_methods(options: Sequence[str]) -> dict[str, MethodConfig]:
    """Each configs/method/<option>.yaml as Hydra composes it on its own (the options its defaults name merged in),
    read and checked as the dry run reads it (one Hydra initialisation for all); ConfigError naming the file and the
    key."""
    for option in options:
        load_group_option("method", option)  # an unknown option: KeyError listing the known ones
    read: dict[str, MethodConfig] = {}
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        for option in options:
            cfg = compose(config_name=f"method/{option}", overrides=list(HYDRA_OWN))
            try:
                read[option] = typed(MethodConfig, cfg.get("method"), "method")  # raw read: a lone file may lack it
                check_method(read[option])
            except ConfigError as error:
                raise ConfigError(f"{shown_path(config_dir() / 'method' / f'{option}.yaml')}: {error}") from None
    return read


def shown_path(path: Path) -> Path:
    """``path`` as a message shows it: relative to the working directory when under it."""
    return path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path


def _read_sections(cfg: DictConfig, table: dict[str, type]) -> None:
    for prefix, schema in table.items():
        typed(schema, OmegaConf.select(cfg, prefix), prefix)  # raw read: each section by its name, into its schema


# What a math benchmark must set (the schema leaves them optional: an external benchmark has none of them)
MATH_BENCHMARK_KEYS = ("data_file", "system_prompt", "answer_field")


def validate_eval_config(cfg: DictConfig) -> None:
    """The evaluation root's sections (``schemas.EVAL_SECTIONS``) read into their schemas; a math benchmark names its
    rows and metrics, an external one its tool and task."""
    _read_sections(cfg, EVAL_SECTIONS)
    benchmark = section_of(cfg, BenchmarkConfig)
    needed = (*MATH_BENCHMARK_KEYS, "metrics") if benchmark.kind == "math" else ("tool", "task")
    for name in needed:
        if not getattr(benchmark, name):
            raise ConfigError(f"benchmark.{name}: missing (benchmark.kind={benchmark.kind} needs it)")


def validate_data_config(cfg: DictConfig) -> None:
    """The data root's sections (``schemas.DATA_SECTIONS``, and a dataset where one is composed) read into their
    schemas."""
    _read_sections(cfg, DATA_SECTIONS)
    if "dataset" in cfg:
        section_of(cfg, DatasetConfig)


def load_group_option(group: str, option: str) -> DictConfig:
    """Read one option file of a config group (e.g. method/gt_grpo) without composing the whole tree."""
    path = config_dir() / group / f"{option}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in (config_dir() / group).glob("*.yaml"))
        raise KeyError(f"unknown {group} {option!r}; known: {', '.join(known)}")
    loaded = OmegaConf.load(path)
    assert isinstance(loaded, DictConfig)
    return loaded


ROOT_VALIDATORS = {"config": validate_config, "eval": validate_eval_config, "data": validate_data_config}
