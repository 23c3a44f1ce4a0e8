"""What ``corewarding audit`` runs (its parser is in cli/audit.py, so `audit --help` loads none of this): one Prefect
flow run per released checkpoint, then each ingested with source ``released``; ``--dry-run`` estimates instead."""

from __future__ import annotations

import argparse
import importlib.util
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from corewarding.cli.output import print_json, stdout_to_stderr
from corewarding.cli.pipeline_commands import selection_kwargs, selection_labels
from corewarding.config import compose_config
from corewarding.evaluation.eval_config import benchmark_configs, expand_benchmarks
from corewarding.interrupts import Interrupted, interruptible, resume_hint
from corewarding.matrix import Cell, Matrix, load_matrix
from corewarding.pipeline.audit import AUDIT_STEP
from corewarding.pipeline.audit_plan import as_rows, estimate, format_estimate
from corewarding.pipeline.cells import check_selection
from corewarding.pipeline.run_summary import PipelineFailed, PipelineReport, format_report
from corewarding.runtime.pool_checks import check_job_overrides, check_pipeline, require_api_url, require_pool_key
from corewarding.runtime.prefect_session import prefect_api

if TYPE_CHECKING:  # the settings module loads duckdb: only a command that runs imports it
    from omegaconf import DictConfig

    from corewarding.pipeline.settings import PipelineSettings

log = logging.getLogger(__name__)
STEPS = [AUDIT_STEP, "ingest"]


def generation_backend(choice: str) -> str:
    """``auto``: vLLM where a CUDA device and vllm are here (the paper's protocol), else transformers."""
    if choice != "auto":
        return choice
    if importlib.util.find_spec("vllm") is not None:
        import torch  # torch: imported when used

        if torch.cuda.is_available():
            return "vllm"
    return "transformers"


def _pipeline_kwargs(args: argparse.Namespace, generation: str) -> dict[str, object]:
    config = list(args.config) + ([f"audit.benchmarks={args.benchmarks}"] if args.benchmarks else [])
    return {
        **selection_kwargs(args),
        "steps": STEPS,
        "eval_overrides": [f"generation={generation}", *args.overrides],
        "force_evaluate": True if args.force else None,
        "work_pool": args.work_pool,
        "config": config,
    }


def _checked(
    args: argparse.Namespace, kwargs: dict[str, object]
) -> tuple[PipelineSettings, Matrix, list[Cell], list[str], list[DictConfig]]:
    """The settings, the matrix, the selected cells (each name checked against the matrix), the benchmarks and their
    configs composed with the evaluation overrides: a typo fails here as one line, before Prefect starts."""
    from corewarding.pipeline.settings import load_settings  # duckdb: imported when used

    settings = load_settings(**kwargs)  # type: ignore[arg-type]  # kwargs: load_settings' keywords, from the flags
    matrix = load_matrix(settings.selection.matrix)
    cells = check_selection(matrix, settings.selection, selection_labels(args))
    names = expand_benchmarks(settings.audit_benchmarks or matrix.eval_benchmarks)
    configs = benchmark_configs(names, [*matrix.eval_overrides, *settings.eval_overrides])
    return settings, matrix, cells, names, configs


def _dry_run(args: argparse.Namespace, kwargs: dict[str, object]) -> int:
    with stdout_to_stderr(args.json):  # --json: the estimate's table on stderr, stdout the JSON document alone
        _, matrix, cells, names, configs = _checked(args, kwargs)
        runs_dir = Path(str(compose_config([], config_name="eval").paths.runs_dir))
        estimates = estimate(cells, configs, runs_dir)
        backend = str(configs[0].generation.backend)
        print(f"audit of {len(cells)} released checkpoint(s) of {matrix.name} on {', '.join(names)}:")
        print(format_estimate(estimates, backend))
    if args.json:
        print_json(as_rows(estimates))
    return 0


def audit(args: argparse.Namespace) -> int:
    """``corewarding audit``: the estimate with ``--dry-run``, else the audit's flow runs; the exit code."""
    if args.dry_run:  # the estimate is for the paper's protocol on a GPU unless a backend is named
        return _dry_run(args, _pipeline_kwargs(args, "vllm" if args.generation == "auto" else args.generation))
    kwargs = _pipeline_kwargs(args, generation_backend(args.generation))
    settings = _checked(args, kwargs)[0]  # a typo in a name or an override fails here, before Prefect starts
    if settings.work_pool:
        require_api_url(f"--work-pool {settings.work_pool}")
        require_pool_key(f"--work-pool {settings.work_pool}")  # the checkpoint jobs are signed with it
        check_job_overrides(settings.overrides, settings.eval_overrides)
    try:
        with interruptible():
            with stdout_to_stderr(args.json), prefect_api(Path.cwd()) as api_url:
                if settings.work_pool:
                    check_pipeline(
                        api_url, settings.work_pool, settings.store_url, settings.store_dvc_remote, Path.cwd()
                    )
                code, report = _run_flow(kwargs)
            if args.json:  # the report, failed checkpoints and all: stdout's one JSON document
                print_json(report.to_dict())
            return code
    except Interrupted as stop:
        print(resume_hint(" ".join(["corewarding", *sys.argv[1:]])), file=sys.stderr)
        return stop.exit_code


def unavailable(report: PipelineReport) -> list[str]:
    """One line per checkpoint whose audit failed (a Hub failure, a benchmark that failed)."""
    return [f"{c.cell_id}: {c.error}" for c in report.cells if c.steps.get(AUDIT_STEP) == "failed"]


def _run_flow(kwargs: dict[str, object]) -> tuple[int, PipelineReport]:
    """The pipeline flow with the audit's steps, its report printed: the exit code and the report."""
    from flows.pipeline import pipeline  # prefect: imported when used

    try:
        result = pipeline(**kwargs)
        report, code = PipelineReport.from_dict(result), 0
    except PipelineFailed as failed:
        report, code = failed.report, 1
    print(format_report(report))
    failures = unavailable(report)
    if failures:
        print(f"\n{len(failures)} checkpoint(s) not audited:", file=sys.stderr)
        for line in failures:
            print(f"  {line}", file=sys.stderr)
    print("\nscores are in the DuckDB store (source 'released'); compare them: corewarding report, or the dashboard")
    return code, report
