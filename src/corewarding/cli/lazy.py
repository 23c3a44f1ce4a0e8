"""A command's handler named by ``module:function`` and imported when the command runs, not when its parser is built:
``corewarding audit --help`` and an argument error never load the pipeline, Hydra, DuckDB or Prefect behind it."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from importlib import import_module

Handler = Callable[[argparse.Namespace], int]


def handler(target: str) -> Handler:
    """The function ``target`` (``"corewarding.cli.audit_run:audit"``) as a command handler; its module is imported on
    the first call. A misspelt target fails at that call with the name, and tests call every command's target."""
    module_name, _, function_name = target.partition(":")

    def run(args: argparse.Namespace) -> int:
        function: Handler = getattr(import_module(module_name), function_name)
        return function(args)

    run.target = target  # type: ignore[attr-defined]  # what the tests resolve without running the command
    return run
