"""Typed schemas of the config sections: the training config's (``configs/config.yaml``: grpo, optimizer, schedule,
vote, verl, and a method's EMA teacher), the pipeline's cell runs, shared store and alerts (``configs/pipeline.yaml``)
and the evaluation's checker and intervals (``configs/eval.yaml``); each field carries its type, its range and a
one-line doc.

``typed(Schema, cfg.section, "section")`` reads a composed section into a frozen dataclass, or raises ConfigError
with one line naming the key (``optimizer.lr=inf: must be finite and > 0``); a key the schema does not know is an
error too (a typo such as ``grpo.kl_cof`` is never silently ignored). Modules take the typed object, not the whole
config. Bottom floor: nothing of the package is imported here.

Modules: ``reading`` (ConfigError, ``setting`` and the rules, ``typed``, ``describe``), ``training``, ``data`` (paths,
base model, data sets, rephrasing), ``evaluation``, ``pipeline``, and ``tables`` (each root's sections,
``section_of``). Every name below is importable from the package itself.
"""

from __future__ import annotations

from corewarding.schemas.data import (
    CHECK_ACTION,
    AnswerColumn,
    BaseModelConfig,
    DatasetConfig,
    DatasourceConfig,
    NumbersCheck,
    PathsConfig,
    RephraseConfig,
    RephraseVllmConfig,
    RewriteCheck,
    RewriteChecks,
    ShapeConfig,
    SizedSetConfig,
    TinyModelConfig,
    TinySetConfig,
    ValidateConfig,
)
from corewarding.schemas.evaluation import (
    BenchmarkConfig,
    BootstrapConfig,
    GenerationConfig,
    LmEvalConfig,
    MathVerifyConfig,
)
from corewarding.schemas.pipeline import ALERT_EVENTS, POSITIVE_NUMBER, AlertsConfig, CellsConfig, StoreConfig
from corewarding.schemas.reading import (
    AT_LEAST_1,
    AT_LEAST_1_OR_NULL,
    BETAS,
    DTYPES,
    GIGABYTES_OR_NULL,
    NON_NEGATIVE,
    POSITIVE,
    SEED,
    UNIT_INTERVAL,
    WHOLE_OR_NULL,
    ConfigError,
    Rule,
    describe,
    field_problem,
    one_of,
    setting,
    typed,
    without_values,
)
from corewarding.schemas.tables import (
    DATA_SECTIONS,
    EVAL_SECTIONS,
    ROOT_SECTIONS,
    SECTIONS,
    key_problem,
    section_of,
)
from corewarding.schemas.training import (
    QUESTION_VIEWS,
    EmaConfig,
    GrpoConfig,
    MethodConfig,
    OptimizerConfig,
    ScheduleConfig,
    TeacherConfig,
    VerlConfig,
    VoteConfig,
)

__all__ = [
    "ALERT_EVENTS",
    "AT_LEAST_1",
    "AT_LEAST_1_OR_NULL",
    "BETAS",
    "CHECK_ACTION",
    "DATA_SECTIONS",
    "DTYPES",
    "EVAL_SECTIONS",
    "GIGABYTES_OR_NULL",
    "NON_NEGATIVE",
    "POSITIVE",
    "POSITIVE_NUMBER",
    "QUESTION_VIEWS",
    "ROOT_SECTIONS",
    "SECTIONS",
    "SEED",
    "UNIT_INTERVAL",
    "WHOLE_OR_NULL",
    "AlertsConfig",
    "AnswerColumn",
    "BaseModelConfig",
    "BenchmarkConfig",
    "BootstrapConfig",
    "CellsConfig",
    "ConfigError",
    "DatasetConfig",
    "DatasourceConfig",
    "EmaConfig",
    "GenerationConfig",
    "GrpoConfig",
    "LmEvalConfig",
    "MathVerifyConfig",
    "MethodConfig",
    "NumbersCheck",
    "OptimizerConfig",
    "PathsConfig",
    "RephraseConfig",
    "RephraseVllmConfig",
    "RewriteCheck",
    "RewriteChecks",
    "Rule",
    "ScheduleConfig",
    "ShapeConfig",
    "SizedSetConfig",
    "StoreConfig",
    "TeacherConfig",
    "TinyModelConfig",
    "TinySetConfig",
    "ValidateConfig",
    "VerlConfig",
    "VoteConfig",
    "describe",
    "field_problem",
    "key_problem",
    "one_of",
    "section_of",
    "setting",
    "typed",
    "without_values",
]
