"""Small commands stay small: text-only rescoring never imports torch or pandas, and a bad override fails before any
heavy import (issue 15, item 8). Each check runs the CLI in a fresh interpreter and reads its ``sys.modules``.

The command line's start-up imports no command group (issue 45): `--help`, an argument error and `rewards score` load
neither Hydra nor DuckDB nor Prefect, and the lazily built parser says exactly what the whole one says."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from corewarding.cli.help import USER_GROUPS
from corewarding.cli.main import GROUPS, build_parser, main

SRC = Path(__file__).resolve().parents[2] / "src"
HEAVY = ("torch", "pandas", "pyarrow", "transformers", "prefect", "hydra", "duckdb")

# Runs main(argv) and prints, as the last stdout line, which heavy modules the process imported.
_PROBE = textwrap.dedent(
    """
    import json, sys
    from corewarding.cli import main
    try:
        code = main(sys.argv[1:])
    except SystemExit as exc:  # --help and argument errors end in argparse's exit
        code = exc.code
    print(json.dumps(sorted(m for m in {heavy!r} if m in sys.modules)))
    sys.exit(code)
    """
).format(heavy=HEAVY)


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}


def _probe(*args: str, cwd: Path) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *args], cwd=cwd, env=_env(), capture_output=True, text=True, timeout=120
    )
    imported = json.loads(done.stdout.strip().splitlines()[-1])
    return done, imported


def _rows(method: str) -> list[dict[str, object]]:
    views = {"co_rewarding_1": ("original", "rephrased"), "co_rewarding_2": ("original", "teacher")}
    return [
        {"uid": f"q{q}", "view": view, "response": f"so \\boxed{{{k % 2}}}", "ground_truth": "1"}
        for q in range(2)
        for view in views.get(method, ("original",))
        for k in range(4)
    ]


@pytest.mark.parametrize("method", ["gt_grpo", "majority_voting", "co_rewarding_1", "co_rewarding_2"])
def test_rewards_score_imports_neither_torch_nor_pandas(tmp_path: Path, method: str) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in _rows(method)))
    out = tmp_path / "out.jsonl"
    done, imported = _probe("rewards", "score", "--method", method, "--input", str(src), "--output", str(out),
                            cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert imported == [], f"rewards score --method {method} imported {imported}"
    assert json.loads(done.stdout.splitlines()[0])["n"] == len(out.read_text().splitlines()) > 0


@pytest.mark.parametrize(
    ("args", "key"),
    [
        (["train", "methd=x"], "methd"),
        (["train", "schedule.totl_steps=3"], "schedule.totl_steps"),
        (["train", "grpo.n=0"], "grpo.n"),  # composes, then fails validation
        (["data", "prepare", "tiny", "datasource.locl_file=x"], "datasource.locl_file"),
        (["demo", "schedule.totl_steps=2"], "schedule.totl_steps"),
    ],
)
def test_bad_override_exits_2_naming_the_key_before_heavy_imports(tmp_path: Path, args: list[str], key: str) -> None:
    done, imported = _probe(*args, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and key in errors[0], done.stderr
    assert "torch" not in imported and "transformers" not in imported, imported


def test_importing_the_command_line_loads_no_heavy_library(tmp_path: Path) -> None:
    """No group module at start-up: neither Hydra, Prefect, torch, DuckDB nor even OmegaConf."""
    libraries = ("hydra", "prefect", "torch", "duckdb", "omegaconf")
    code = f"import corewarding.cli.main, sys; print(sorted(m for m in sys.modules if m.split('.')[0] in {libraries}))"
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=_env(), capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", done.stdout


def test_the_top_help_exits_0_and_lists_every_command_and_group(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "corewarding.cli", "--help"], cwd=tmp_path, env=_env(),
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    commands = list(_sub(build_parser()).choices)
    assert [name for _, entries in GROUPS for name, _ in entries] == commands  # every group module's commands, in order
    for name in commands:
        assert re.search(rf"\n    {re.escape(name)}\s", done.stdout), name  # argparse's row of the command
    for group, _ in USER_GROUPS:
        assert f"\n  {group}:" in done.stdout, group


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["--help"], 0),
        ([], 2),  # no command
        (["no-such-command"], 2),
        (["rewards", "--help"], 0),
        (["rewards", "score", "--help"], 0),
        (["rewards", "score", "--method", "gt_grpo"], 2),  # no --input, --output
        (["audit", "--help"], 0),
        (["audit", "--generation", "tpu"], 2),
        (["pipeline", "--help"], 0),
        (["pipeline", "run", "--help"], 0),
        (["worker", "--limit", "0", "--pool", "gpu"], 2),
    ],
)
def test_help_and_argument_errors_load_no_heavy_library(tmp_path: Path, args: list[str], code: int) -> None:
    done, imported = _probe(*args, cwd=tmp_path)
    assert done.returncode == code, done.stderr
    assert "Traceback" not in done.stderr
    assert imported == [], f"corewarding {' '.join(args)} imported {imported}"


def _sub_or_none(parser: argparse.ArgumentParser) -> argparse._SubParsersAction | None:  # type: ignore[type-arg]
    return next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)


def _sub(parser: argparse.ArgumentParser) -> argparse._SubParsersAction:  # type: ignore[type-arg]
    sub = _sub_or_none(parser)
    assert sub is not None
    return sub


def _paths(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every command and sub-command of ``parser``, by the words that name it, with its parser."""
    yield path, parser
    sub = _sub_or_none(parser)
    for name, child in sub.choices.items() if sub else ():
        yield from _paths(child, (*path, name))


def test_the_lazy_parser_says_what_the_whole_one_says(capsys: pytest.CaptureFixture[str]) -> None:
    """Each command's --help and an argument error, through main (which imports one group), are the whole parser's;
    the stand-ins' names, help lines and order are the group modules' own."""
    whole = build_parser()
    assert build_parser(()).format_help() == whole.format_help()
    for path, parser in _paths(whole):
        with pytest.raises(SystemExit) as helped:
            main([*path, "--help"])
        assert (helped.value.code, capsys.readouterr().out) == (0, parser.format_help()), path
        groups = [[*path, "no-such-command"]] if _sub_or_none(parser) else []  # a leaf's positionals may take it
        for wrong in [[*path, "--no-such-option"], *groups]:
            with pytest.raises(SystemExit) as lazy:
                main(wrong)
            lazy_err = capsys.readouterr().err
            with pytest.raises(SystemExit) as eager:
                build_parser().parse_args(wrong)
            assert (lazy.value.code, lazy_err) == (eager.value.code, capsys.readouterr().err), wrong


def test_every_lazy_handler_names_a_function_that_exists() -> None:
    """A handler imported when its command runs (cli/lazy.py) is resolved here for every command that has one, so a
    misspelt module or function fails this test, not a user's first run of the command."""
    targets = []
    for path, parser in _paths(build_parser()):
        func = parser.get_default("func")
        target = getattr(func, "target", None)
        if target:
            module, _, name = target.partition(":")
            assert callable(getattr(importlib.import_module(module), name, None)), (path, target)
            targets.append(target)
    assert {"corewarding.cli.audit_run:audit", "corewarding.cli.pipeline_commands:run"} <= set(targets)
