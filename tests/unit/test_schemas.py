"""The typed schemas of the training config: a composed section reads into its dataclass; a missing, unknown, mistyped
or out-of-range value is one line naming the key; every field carries a doc."""

from __future__ import annotations

import dataclasses

import pytest

from corewarding.config import ConfigError, compose_config
from corewarding.schemas import (
    SECTIONS,
    BootstrapConfig,
    CellsConfig,
    EmaConfig,
    GrpoConfig,
    MathVerifyConfig,
    OptimizerConfig,
    ScheduleConfig,
    StoreConfig,
    VerlConfig,
    describe,
    key_problem,
    section_of,
    typed,
)


def test_the_composed_sections_read_into_their_schemas() -> None:
    cfg = compose_config(["method=co_rewarding_2"])
    optimizer = section_of(cfg, OptimizerConfig)
    assert optimizer.lr == 3.0e-6 and optimizer.betas == (0.9, 0.999)  # a tuple, not a ListConfig
    assert section_of(cfg, GrpoConfig).kl_coef == 0.001  # Co-rewarding-II's own value
    assert section_of(cfg, ScheduleConfig).total_steps is None
    assert section_of(cfg, VerlConfig).logger == ("console", "file")
    assert typed(EmaConfig, cfg.method.teacher.ema, "method.teacher.ema").alpha_end == 1.0e-5
    with pytest.raises(dataclasses.FrozenInstanceError):
        optimizer.lr = 1.0  # type: ignore[misc]


@pytest.mark.parametrize(
    ("section", "change", "message"),
    [
        ("grpo", {"kl_cof": 0.1}, "grpo.kl_cof: unknown key; grpo has train_batch_size, n, "),
        ("schedule", {"epochs": None}, "schedule.epochs=None: must be a whole number >= 1"),
        ("schedule", {"total_steps": True}, "schedule.total_steps=True: must be a whole number >= 1, or null"),
        ("optimizer", {"lr": "fast"}, "optimizer.lr='fast': must be finite and > 0"),
        ("vote", {"math_verify_workers": 0}, "vote.math_verify_workers=0: must be an integer >= 1, or null (one per"),
        ("verl", {"ray_address": 6379}, "verl.ray_address=6379: must be of type str | None"),
    ],
)  # fmt: skip
def test_a_bad_value_is_one_line_naming_the_key(section: str, change: dict, message: str) -> None:
    values = {**compose_config([])[section], **change}
    with pytest.raises(ConfigError) as caught:
        typed(SECTIONS[section], values, section)
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)


def test_a_missing_key_is_named() -> None:
    values = dict(compose_config([]).optimizer)
    del values["eps"]
    with pytest.raises(ConfigError, match=r"^optimizer\.eps: missing$"):
        typed(OptimizerConfig, values, "optimizer")


def test_every_field_has_a_doc_and_key_problem_checks_by_dotted_key() -> None:
    for schema in (*SECTIONS.values(), EmaConfig):
        for name, type_name, _, doc in describe(schema):
            assert doc and type_name, (schema.__name__, name)
    assert dict((r[0], r[1]) for r in describe(OptimizerConfig))["betas"] == "tuple[float, float]"
    assert key_problem("optimizer.betas", [0.9, 0.999]) is None
    assert key_problem("optimizer.betas", [0.9, 1.0]) == "two numbers, each in [0, 1)"
    assert key_problem("grpo.n", 2.0) == "a whole number >= 1"  # 2.0 is not a count


def test_the_pipeline_and_evaluation_sections_have_schemas_too() -> None:
    pipeline = compose_config(["store.url=", "store.sync_interval_s=0.5"], config_name="pipeline")
    store = typed(StoreConfig, pipeline.store, "store")
    assert not store.configured and store.sync_interval_s == 0.5  # an empty URL names no store, as null does
    with pytest.raises(ConfigError, match=r"^cells\.poll_s=0: must be a number > 0$"):
        typed(CellsConfig, {**pipeline.cells, "poll_s": 0}, "cells")
    evaluation = compose_config([], config_name="eval")
    assert typed(BootstrapConfig, evaluation.bootstrap, "bootstrap").confidence == 0.95
    with pytest.raises(ConfigError, match=r"^math_verify\.timeout_s=-1: must be > 0$"):
        typed(MathVerifyConfig, {**evaluation.math_verify, "timeout_s": -1}, "math_verify")
