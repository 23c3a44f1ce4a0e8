"""`corewarding --help` names every command in a group, the internal ones apart; each command's help has an example."""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys

import pytest

from corewarding.cli.help import (
    EXAMPLES,
    GROUP_OVERRIDES,
    INTERNAL,
    KEY_OVERRIDES,
    NEW_KEY_OVERRIDE,
    USER_GROUPS,
    attach_examples,
)
from corewarding.cli.main import build_parser
from corewarding.config import compose_config


def _commands() -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def test_the_top_help_names_every_command_and_puts_the_internal_ones_under_their_own_heading() -> None:
    text = build_parser().format_help()
    for name in _commands():
        assert re.search(rf"\n    {re.escape(name)}\s", text), name  # argparse's row of the command
    grouped = [name for _, names in USER_GROUPS for name in names]
    assert sorted(grouped + list(INTERNAL)) == sorted(_commands())
    internal = text[text.index("internal commands") :]
    assert all(f"\n  {name} " in internal for name in INTERNAL)
    assert not any(f"\n  {name} " in internal for name in grouped)


@pytest.mark.parametrize("name", sorted(_commands()))
def test_every_command_help_ends_with_an_example(name: str) -> None:
    text = _commands()[name].format_help()
    examples = text[text.rindex("examples:") :].splitlines()[1:]
    assert examples and all(line.strip().startswith("corewarding ") for line in examples if line.strip())


def test_train_help_says_how_overrides_work() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "corewarding.cli", "train", "--help"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0
    assert "key=value" in done.stdout and NEW_KEY_OVERRIDE in done.stdout and "--dry-run" in done.stdout


def test_a_command_without_a_group_is_refused() -> None:
    with pytest.raises(RuntimeError, match="unheard-of"):
        attach_examples({"unheard-of": argparse.ArgumentParser()})


def test_a_closed_pipe_ends_quietly() -> None:
    code = "import sys; from corewarding.cli import main; sys.exit(main(['matrix', 'list', '--matrix', 'paper']))"
    done = subprocess.run(
        f'{sys.executable} -c "{code}" | head -1', shell=True, capture_output=True, text=True, timeout=60
    )
    assert done.stdout.count("\n") == 1
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_every_example_is_a_command_the_parser_accepts(name: str) -> None:
    for line in EXAMPLES[name]:
        args = shlex.split(line)[1:]
        parsed = build_parser().parse_args(args)
        assert parsed.command == name, line


def test_the_override_examples_of_train_help_compose() -> None:
    cfg = compose_config([*GROUP_OVERRIDES.split(), *KEY_OVERRIDES.split(), NEW_KEY_OVERRIDE])
    assert (cfg.method.name, cfg.base_model.name, cfg.dataset.name, cfg.backend) == (
        "co_rewarding_2",
        "qwen3-8b-base",
        "math",
        "verl",
    )
    assert cfg.optimizer.lr == 1e-6 and cfg.verl.nnodes == 2 and cfg.note == "first-try"


def test_the_commands_users_type_for_a_work_pool_are_not_filed_as_internal() -> None:
    text = build_parser().format_help()
    orchestration = next(line for line in text.splitlines() if line.strip().startswith("orchestration:"))
    assert orchestration.split(":", 1)[1].strip().split(", ") == ["pipeline", "deploy", "worker", "pool-key"]
    internal = text[text.index("internal commands") :]
    assert not any(f"\n  {name} " in internal for name in ("deploy", "worker", "pool-key"))


@pytest.mark.parametrize(("command", "action"), [("pipeline", "run"), ("results", "synthetic"), ("pipeline", "cells")])
def test_a_sub_command_help_shows_its_own_examples(command: str, action: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "corewarding.cli", command, action, "--help"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    examples = done.stdout[done.stdout.rindex("examples:") :].splitlines()[1:]
    expected = [line for line in EXAMPLES[command] if line.split()[1:3] == [command, action]]
    assert len(expected) >= 1 and [line.strip() for line in examples if line.strip()] == expected
    for line in expected:  # each parses as the sub-command it is shown under
        assert build_parser().parse_args(shlex.split(line)[1:]).action == action
