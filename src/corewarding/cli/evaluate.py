"""``corewarding evaluate``: one model, or every saved checkpoint step of a run, on a list of benchmarks."""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import TYPE_CHECKING

from corewarding.cli.output import print_json, stdout_to_stderr
from corewarding.config import compose_config
from corewarding.evaluation.eval_config import benchmark_configs, expand_benchmarks
from corewarding.evaluation.targets import model_target, run_targets
from corewarding.matrix import parse_cell_id, run_dir

if TYPE_CHECKING:  # the units module loads pyarrow: only `evaluate` itself imports it
    from corewarding.evaluation.units import UnitOutcome


def _out_dir_for_model(model: str) -> Path:
    return Path("evals") / re.sub(r"[^A-Za-z0-9._-]+", "_", model.strip("/")).strip("_")


def _resolve_run_dir(run: str, runs_dir: str) -> Path:
    """A run folder, or a cell id whose folder is ``{runs_dir}/{cell_id}``."""

    path = Path(run)
    if path.is_dir():
        return path
    if "/" in run:  # a path, not a cell id: never joined under runs_dir (that gave runs/runs/...)
        raise FileNotFoundError(f"--run {run}: no such run folder (`make demo` writes runs/<cell_id>)")
    try:
        return run_dir(parse_cell_id(run), runs_dir)
    except ValueError as exc:
        raise FileNotFoundError(f"--run {run!r}: neither a run folder nor a cell id") from exc


def format_outcomes(outcomes: list[UnitOutcome]) -> str:
    """A plain table: step, benchmark, status, metrics."""
    lines = [f"{'step':<6} {'benchmark':<18} {'status':<10} metrics"]
    for o in outcomes:
        step = "base" if o.step is None else str(o.step)
        shown = o.message or "  ".join(f"{k}={v:.3f}" for k, v in o.metrics.items())
        lines.append(f"{step:<6} {o.benchmark:<18} {o.status:<10} {shown}")
    return "\n".join(lines)


def _evaluate(args: argparse.Namespace) -> int:
    from corewarding.evaluation.harness import evaluate_targets  # pyarrow: imported when used

    with stdout_to_stderr(args.json):  # --json: the table, and whatever a backend prints, on stderr
        names = expand_benchmarks(args.benchmarks)
        configs = benchmark_configs(names, args.overrides)
        if args.model:
            targets = [model_target(args.model)]
            out_dir = Path(args.out) if args.out else _out_dir_for_model(args.model)
        else:
            runs_dir = str(compose_config(args.overrides, config_name="eval").paths.runs_dir)
            out_dir = _resolve_run_dir(args.run, runs_dir)
            targets = run_targets(out_dir, args.steps, args.include_base)
        outcomes = evaluate_targets(targets, configs, out_dir)
        print(format_outcomes(outcomes))
        skipped = sum(o.status == "skipped" for o in outcomes)
        failed = sum(o.status == "failed" for o in outcomes)
        print(f"\nresults: {out_dir / 'eval'}/metrics.parquet and samples.parquet ({skipped} skipped, {failed} failed)")
    if args.json:
        print_json([o.__dict__ for o in outcomes])
    return 1 if failed else 0


def add_subcommands(sub: argparse._SubParsersAction) -> None:
    """Register ``evaluate``."""
    evaluate = sub.add_parser(
        "evaluate",
        help="evaluate a model or every checkpoint step of a run on benchmarks",
        description="Hydra overrides apply to every benchmark, e.g. benchmark.limit=20 generation=vllm",
    )
    target = evaluate.add_mutually_exclusive_group(required=True)
    target.add_argument("--model", help="a Hub id or a local model folder")
    target.add_argument("--run", help="a run folder or a cell id: evaluates its saved checkpoint steps")
    evaluate.add_argument("--benchmarks", default="paper", help="names or suites, comma-separated (default: paper)")
    evaluate.add_argument("--steps", default="all", help="with --run: all (default), last, or e.g. 10,20")
    evaluate.add_argument("--include-base", action="store_true", help="with --run: also the base model (step base)")
    evaluate.add_argument("--out", default=None, help="with --model: the output folder (default evals/<model>)")
    evaluate.add_argument(
        "--json", action="store_true",
        help="print the outcomes as one JSON document on stdout; the table goes to stderr",
    )  # fmt: skip
    evaluate.add_argument("overrides", nargs="*")
    evaluate.set_defaults(func=_evaluate)
