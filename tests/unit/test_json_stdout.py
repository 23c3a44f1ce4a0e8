"""``--json`` (issue 45): on every command that has it, stdout is the JSON document alone and the table goes to stderr,
so ``corewarding ... --json > out.json`` writes valid JSON.

Each command runs in a fresh process, on CPU and offline. ``pipeline run`` and ``audit`` without ``--dry-run`` need a
Prefect server and a flow; the probe replaces those two with a flow that returns a report and, like a training or
evaluation backend, writes to stdout three ways: ``print``, the file descriptor, a child process. All three must land
on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from corewarding.cli.main import build_parser
from corewarding.files import write_parquet_atomic
from corewarding.rows import make_row
from tests.unit.test_claims import II_BEATS_MV, II_OVER_MV, _store

NOISE = ("noise from print", "noise from the descriptor", "noise from a child process")

# main(argv) in a fresh interpreter; with --fake-flow first, the private Prefect server and the pipeline flow are
# replaced by a flow that makes noise on stdout and returns a report of one done cell.
_PROBE = textwrap.dedent(
    """
    import contextlib, os, subprocess, sys, types
    from corewarding.cli.main import main

    argv = sys.argv[1:]
    if argv[0] == "--fake-flow":
        argv = argv[1:]
        from corewarding.cli import audit_run, pipeline_commands
        from corewarding.pipeline.run_summary import CellReport, PipelineReport

        def flow(**kwargs):
            print("noise from print")
            os.write(1, b"noise from the descriptor\\n")
            subprocess.run([sys.executable, "-c", "print('noise from a child process')"], check=True)
            steps = {step: "done" for step in kwargs["steps"] or ["train"]}
            return PipelineReport(kwargs["matrix"], [CellReport("the_cell", "runs/the_cell", steps)]).to_dict()

        @contextlib.contextmanager
        def no_server(root):
            yield "http://127.0.0.1:9/api"

        sys.modules["flows.pipeline"] = types.SimpleNamespace(pipeline=flow)
        pipeline_commands.prefect_api = audit_run.prefect_api = no_server
    sys.exit(main(argv))
    """
)


def _command(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "hf"), HF_TOKEN="")
    return subprocess.run([sys.executable, "-c", _PROBE, *args], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)  # fmt: skip


def _matrix_list(tmp_path: Path) -> tuple[list[str], Callable[[Any], bool], int]:
    return ["matrix", "list", "--matrix", "demo", "--json"], lambda doc: len(doc) == 8, 0


def _dry_run(tmp_path: Path) -> tuple[list[str], Callable[[Any], bool], int]:
    args = ["pipeline", "run", "--dry-run", "--json", "--matrix", "demo", "--cell", "gt_grpo__tiny__tiny",
            "--config", f"results_db={tmp_path / 'none.duckdb'}", "--gpus", "3"]  # fmt: skip

    def expected(doc: Any) -> bool:  # the cell, its footnote defined, the totals' GPUs (a CPU cell: no wall time)
        cells, total = doc["cells"], doc["total"]
        return (
            [c["cell_id"] for c in cells] == ["gt_grpo__tiny__tiny"] and list(doc["footnotes"]) == ["a"]
            and cells[0]["footnote"] == "a"
            and (total["gpus"], total["wall_hours"], total["eval_gpu_hours"]) == (3, None, 0.0)
        )  # fmt: skip

    return args, expected, 0


def _run(tmp_path: Path) -> tuple[list[str], Callable[[Any], bool], int]:
    args = ["--fake-flow", "pipeline", "run", "--json", "--matrix", "demo", "--cell", "gt_grpo__tiny__tiny"]
    return args, lambda doc: doc["matrix"] == "demo" and doc["cells"][0]["cell_id"] == "the_cell", 0


def _audit_dry_run(tmp_path: Path) -> tuple[list[str], Callable[[Any], bool], int]:
    args = ["audit", "--dry-run", "--json", "--cell", "gt_grpo__qwen3-4b-base__math"]
    return args, lambda doc: doc[0]["base_model"] == "qwen3-4b-base" and doc[0]["cells"] == 1, 0


def _audit(tmp_path: Path) -> tuple[list[str], Callable[[Any], bool], int]:
    args = ["--fake-flow", "audit", "--json", "--cell", "gt_grpo__qwen3-4b-base__math", "--generation", "transformers"]
    return args, lambda doc: doc["matrix"] == "paper_v3" and doc["cells"][0]["steps"]["audit"] == "done", 0


def _evaluate(tmp_path: Path) -> tuple[list[str], Callable[[Any], bool], int]:
    """A real evaluation of a model folder that cannot load: one failed unit, exit 1, the outcome still JSON."""
    data = tmp_path / "set.parquet"
    write_parquet_atomic([make_row(f"p{i}", gold, i, "test") for i, gold in enumerate(["1", "2"])], data)
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    settings = ["generation=transformers", f"benchmark.data_file={data}", "benchmark.n=1", "benchmark.metrics=[pass@1]"]
    args = ["evaluate", "--json", "--model", str(model), "--out", str(tmp_path / "out"), "--benchmarks", "math500"]
    args += settings
    return args, lambda doc: [(o["benchmark"], o["status"]) for o in doc] == [("math500", "failed")], 1


def _claims(tmp_path: Path) -> tuple[list[str], Callable[[Any], bool], int]:
    db = _store(tmp_path, II_OVER_MV)
    claims = tmp_path / "claims.yaml"
    claims.write_text("claims:\n" + II_BEATS_MV)
    return ["claims", "--json", "--db", str(db), "--file", str(claims)], lambda doc: doc[0]["id"] == "ii_beats_mv", 0


CASES = {
    "matrix list": _matrix_list,
    "pipeline run --dry-run": _dry_run,
    "pipeline run": _run,
    "audit --dry-run": _audit_dry_run,
    "audit": _audit,
    "evaluate": _evaluate,
    "claims": _claims,
}
TABLE_LINE = {  # a line of each command's human output, which must now be on stderr
    "matrix list": "gt_grpo__tiny__tiny\t",
    "pipeline run --dry-run": "dry run of 1 cell(s) of demo",
    "pipeline run": "results are in the DuckDB store",
    "audit --dry-run": "audit of 1 released checkpoint(s) of paper_v3",
    "audit": "scores are in the DuckDB store",
    "evaluate": "results: ",
    "claims": "ii_beats_mv (T1): II beats MV",
}


def _json_commands() -> set[str]:
    """Every command of the parser that has a --json option, as 'group action'."""
    found: set[str] = set()

    def walk(parser: Any, path: tuple[str, ...]) -> None:
        for action in parser._actions:
            if "--json" in action.option_strings:
                found.add(" ".join(path))
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, (*path, name))

    walk(build_parser(), ())
    return found


def test_every_json_command_is_covered() -> None:
    assert _json_commands() == {name.removesuffix(" --dry-run") for name in CASES}


@pytest.mark.parametrize("name", list(CASES))
def test_stdout_is_the_json_document_alone(name: str, tmp_path: Path) -> None:
    args, expected, code = CASES[name](tmp_path)
    done = _command(tmp_path, *args)
    assert done.returncode == code, done.stderr[-3000:]
    document = json.loads(done.stdout)  # the whole of stdout, not its last line
    assert expected(document), done.stdout[:2000]
    assert TABLE_LINE[name] in done.stderr, done.stderr[-3000:]
    if args[0] == "--fake-flow":  # a backend's output, however written, is not on stdout either
        assert all(noise in done.stderr and noise not in done.stdout for noise in NOISE), done.stderr[-3000:]
