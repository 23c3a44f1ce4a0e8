"""The sections of each config root (training, evaluation, data) by name, and ``section_of``: a composed config's
section read into its schema."""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig, OmegaConf

from corewarding.schemas.data import (
    BaseModelConfig,
    DatasetConfig,
    DatasourceConfig,
    PathsConfig,
    RephraseConfig,
    ValidateConfig,
)
from corewarding.schemas.evaluation import BenchmarkConfig, BootstrapConfig, GenerationConfig, MathVerifyConfig
from corewarding.schemas.reading import T, field_problem, typed
from corewarding.schemas.training import (
    GrpoConfig,
    MethodConfig,
    OptimizerConfig,
    ScheduleConfig,
    VerlConfig,
    VoteConfig,
)

SECTIONS: dict[str, type] = {
    "grpo": GrpoConfig,
    "optimizer": OptimizerConfig,
    "schedule": ScheduleConfig,
    "vote": VoteConfig,
    "verl": VerlConfig,
    "paths": PathsConfig,
    "base_model": BaseModelConfig,
    "dataset": DatasetConfig,
    "method": MethodConfig,
}
EVAL_SECTIONS: dict[str, type] = {  # configs/eval.yaml
    "paths": PathsConfig,
    "benchmark": BenchmarkConfig,
    "generation": GenerationConfig,
    "math_verify": MathVerifyConfig,
    "bootstrap": BootstrapConfig,
}
DATA_SECTIONS: dict[str, type] = {  # configs/data.yaml (and a dataset where a command composes one)
    "paths": PathsConfig,
    "base_model": BaseModelConfig,
    "datasource": DatasourceConfig,
    "validate": ValidateConfig,
    "rephrase": RephraseConfig,
}
ROOT_SECTIONS: dict[str, dict[str, type]] = {"config": SECTIONS, "eval": EVAL_SECTIONS, "data": DATA_SECTIONS}


def section_of(cfg: DictConfig, schema: type[T]) -> T:
    """The composed config's section of ``schema`` (one of ``ROOT_SECTIONS``' tables), typed: what a module takes
    instead of the whole config."""
    prefix = next(name for table in ROOT_SECTIONS.values() for name, known in table.items() if known is schema)
    return typed(schema, OmegaConf.select(cfg, prefix), prefix)


def key_problem(key: str, value: Any) -> str | None:
    """``field_problem`` by dotted key (``optimizer.lr``), for the sections of ``SECTIONS``."""
    section, _, name = key.partition(".")
    return field_problem(SECTIONS[section], name, value)
