"""The run options are written once (``RunOptions`` in corewarding/pipeline/options.py): each field is an option of
``pipeline run``, a parameter of the pipeline flow and a keyword of ``load_settings`` whose default is configured."""

from __future__ import annotations

import argparse
import dataclasses
import json
from typing import Annotated, Any

import pytest
from prefect import flow

from corewarding.cli.main import build_parser
from corewarding.cli.pipeline import options_from_args
from corewarding.config import ConfigError
from corewarding.pipeline import options
from corewarding.pipeline.options import Option, RunOptions, with_run_options
from corewarding.pipeline.settings import deployment_specs, load_settings

# What ``pipeline run`` has besides the run options: the run's own switches and the config overrides.
RUN_ONLY = {"help", "config", "json", "dry_run", "gpus"}


def _run_parser() -> argparse.ArgumentParser:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    actions = next(a for a in sub.choices["pipeline"]._actions if isinstance(a, argparse._SubParsersAction))
    return actions.choices["run"]


def _toy_options() -> type:
    """RunOptions with one more field, as a developer would add it: its type and its Option, nothing else."""
    hint = Annotated[int | None, Option("new tokens per answer", "toy.max_new_tokens")]
    field = dataclasses.field(default=None)
    return dataclasses.make_dataclass("Toy", [("max_new_tokens", hint, field)], bases=(RunOptions,), frozen=True)


def test_every_run_option_is_a_cli_option_a_flow_parameter_and_a_load_settings_keyword() -> None:
    from flows.pipeline import pipeline

    names = set(options.names())
    assert {"matrix", "methods", "steps", "overrides", "push", "work_pool"} <= names and len(names) == 11
    dests = {action.dest for action in _run_parser()._actions} - RUN_ONLY
    assert dests == {spec.dest for spec in options.specs()}
    assert set(options_from_args(_run_parser().parse_args([]))) == names
    assert set(pipeline.parameters.properties) == names | {"config", "schedule"}
    assert set(dataclasses.asdict(load_settings(**dict.fromkeys(names)).options)) == names


def test_a_new_field_reaches_the_cli_the_flow_and_load_settings_with_no_other_edit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(options, "RunOptions", _toy_options())

    parser = _run_parser()
    assert "--max-new-tokens MAX_NEW_TOKENS" in parser.format_help() and "new tokens per answer" in parser.format_help()
    given = options_from_args(parser.parse_args(["--max-new-tokens", "384", "--cell", "c1"]))
    assert given["max_new_tokens"] == 384 and given["cells"] == ["c1"]

    configured = ["+toy.max_new_tokens=96"]
    assert load_settings(configured).options.max_new_tokens == 96  # its default, from the config
    assert load_settings(configured, max_new_tokens=384).options.max_new_tokens == 384  # given, it wins
    assert load_settings().options.max_new_tokens is None

    def run(*, config: list[str] | None = None, **chosen: Any) -> int:
        """The new option as a run sees it."""
        return int(load_settings(config or [], **chosen).options.max_new_tokens)

    toy_flow = flow(name="toy-pipeline")(with_run_options(run))
    schema = toy_flow.parameters.properties["max_new_tokens"]
    assert (
        schema["anyOf"] == [{"type": "integer"}, {"type": "null"}] and schema["description"] == "new tokens per answer"
    )
    parameters = toy_flow.validate_parameters(json.loads(json.dumps({"max_new_tokens": "512", "config": configured})))
    assert parameters["max_new_tokens"] == 512 and toy_flow.fn(**parameters) == 512
    assert deployment_specs(["+deployments.nightly.parameters.max_new_tokens=7"])["nightly"]["parameters"] == {
        "matrix": "paper",
        "push": True,
        "max_new_tokens": 7,
    }


def test_command_line_forms_become_the_flows_parameters() -> None:
    args = _run_parser().parse_args(
        ["--method", "gt_grpo,,majority_voting", "--eval-override", "seed=1", "--eval-override", "seed=2",
         "--push", "--work-pool", "gpu", "optimizer.lr=2e-6", "trainer.total_steps=3"]
    )  # fmt: skip
    assert options_from_args(args) == {
        "matrix": None,
        "methods": ["gt_grpo", "majority_voting"],
        "base_models": None,
        "datasets": None,
        "cells": None,
        "steps": None,
        "overrides": ["optimizer.lr=2e-6", "trainer.total_steps=3"],
        "eval_overrides": ["seed=1", "seed=2"],
        "push": True,
        "force_evaluate": None,  # a switch left off is the configured value
        "work_pool": "gpu",
    }


def test_an_option_not_given_is_the_configured_value_and_an_unknown_one_is_refused() -> None:
    settings = load_settings(["publish.push=true", "force_evaluate=true", "steps=[train]"])
    assert settings.push is True and settings.force_evaluate is True and settings.steps == ("train",)
    assert settings.options.steps == ["train"] and settings.options.matrix == "demo"
    given = load_settings(["publish.push=true", "steps=[train]"], push=False, steps=["evaluate", "ingest"])
    assert given.push is False and given.steps == ("evaluate", "ingest")
    with pytest.raises(TypeError, match=r"unknown pipeline option.*colour"):
        load_settings(colour="red")
    with pytest.raises(ConfigError, match=r"deployments\.nightly\.parameters: unknown colour"):
        deployment_specs(["+deployments.nightly.parameters.colour=red"])


def test_a_field_without_its_option_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    bare = dataclasses.make_dataclass(
        "Bare", [("seed", int | None, dataclasses.field(default=None))], bases=(RunOptions,), frozen=True
    )
    monkeypatch.setattr(options, "RunOptions", bare)
    with pytest.raises(TypeError, match=r"RunOptions\.seed: annotate it Annotated"):
        options.specs()


def test_a_scheduled_deployments_parameters_round_trip_as_json() -> None:
    from flows.pipeline import pipeline

    scheduled = {"schedule": "nightly", "work_pool": "gpu"}  # what a deployment carries (flows/deploy.py)
    chosen = {"methods": ["gt_grpo"], "steps": ["evaluate"], "push": True, "config": ["store.url=/s"]}
    for parameters in (scheduled, chosen):
        validated = pipeline.validate_parameters(json.loads(json.dumps(parameters)))
        assert {k: v for k, v in validated.items() if v is not None} == parameters  # the rest: None, configured
    deployment = pipeline.to_deployment(name="nightly", parameters={"schedule": "nightly"})
    assert deployment.parameters == {"schedule": "nightly"}
    assert set(deployment._parameter_openapi_schema.properties) == set(pipeline.parameters.properties)
