"""``corewarding audit``: evaluate the paper's released Hub checkpoints under the paper's protocol.

One Prefect flow run per checkpoint (the pipeline's cell flow with its audit step), on this machine or on a work
pool like training cells; then each is ingested into the results store with source ``released``. Ctrl-C stops it;
the same command resumes, and finished checkpoints are not evaluated again.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import sys
from pathlib import Path

from corewarding.cli.pipeline import selection_kwargs
from corewarding.config import compose_config
from corewarding.evaluation.eval_config import benchmark_configs, expand_benchmarks
from corewarding.interrupts import Interrupted, interruptible, resume_hint
from corewarding.matrix import load_matrix
from corewarding.pipeline.audit import AUDIT_STEP
from corewarding.pipeline.audit_plan import as_rows, estimate, format_estimate
from corewarding.pipeline.cells import selected_cells
from corewarding.pipeline.report import PipelineFailed, PipelineReport, format_report
from corewarding.runtime.pool_checks import check_job_overrides, check_pipeline, require_api_url, require_pool_key
from corewarding.runtime.prefect_session import prefect_api

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


def _dry_run(args: argparse.Namespace, kwargs: dict[str, object]) -> int:
    from corewarding.pipeline.settings import load_settings  # duckdb: imported when used

    settings = load_settings(**kwargs)  # type: ignore[arg-type]
    matrix = load_matrix(settings.selection.matrix)
    cells = selected_cells(matrix, settings.selection)
    names = expand_benchmarks(settings.audit_benchmarks or matrix.eval_benchmarks)
    configs = benchmark_configs(names, [*matrix.eval_overrides, *settings.eval_overrides])
    runs_dir = Path(str(compose_config([], config_name="eval").paths.runs_dir))
    estimates = estimate(cells, configs, runs_dir)
    backend = str(configs[0].generation.backend)
    print(f"audit of {len(cells)} released checkpoint(s) of {matrix.name} on {', '.join(names)}:")
    print(format_estimate(estimates, backend))
    if args.json:
        print(json.dumps(as_rows(estimates)))
    return 0


def _audit(args: argparse.Namespace) -> int:
    if args.dry_run:  # the estimate is for the paper's protocol on a GPU unless a backend is named
        return _dry_run(args, _pipeline_kwargs(args, "vllm" if args.generation == "auto" else args.generation))
    kwargs = _pipeline_kwargs(args, generation_backend(args.generation))
    from corewarding.pipeline.settings import load_settings  # duckdb: imported when used

    settings = load_settings(**kwargs)  # type: ignore[arg-type]  # a typo fails here, before Prefect starts
    if settings.work_pool:
        require_api_url(f"--work-pool {settings.work_pool}")
        require_pool_key(f"--work-pool {settings.work_pool}")  # the checkpoint jobs are signed with it
        check_job_overrides(settings.overrides, settings.eval_overrides)
    try:
        with interruptible(), prefect_api(Path.cwd()) as api_url:
            if settings.work_pool:
                check_pipeline(api_url, settings.work_pool, settings.store_url, settings.store_dvc_remote, Path.cwd())
            return _run_flow(args, kwargs)
    except Interrupted as stop:
        print(resume_hint(" ".join(["corewarding", *sys.argv[1:]])), file=sys.stderr)
        return stop.exit_code


def unavailable(report: PipelineReport) -> list[str]:
    """One line per checkpoint whose audit failed (a Hub failure, a benchmark that failed)."""
    return [f"{c.cell_id}: {c.error}" for c in report.cells if c.steps.get(AUDIT_STEP) == "failed"]


def _run_flow(args: argparse.Namespace, kwargs: dict[str, object]) -> int:
    from flows.pipeline import pipeline  # prefect: imported when used

    try:
        result = pipeline(**kwargs)  # type: ignore[arg-type]
        report, code = PipelineReport.from_dict(result), 0
    except PipelineFailed as failed:
        report, code = failed.report, 1
    print(format_report(report))
    failures = unavailable(report)
    if failures:
        print(f"\n{len(failures)} checkpoint(s) not audited:", file=sys.stderr)
        for line in failures:
            print(f"  {line}", file=sys.stderr)
    if args.json:
        print(json.dumps(report.to_dict()))
    print("\nscores are in the DuckDB store (source 'released'); compare them: corewarding report, or the dashboard")
    return code


def add_subcommands(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register ``audit``."""
    audit = sub.add_parser(
        "audit",
        help="evaluate the paper's released Hub checkpoints under the paper's protocol (Prefect flow runs)",
        description="Evaluate the released checkpoint (hub repo of each cell) on the matrix's benchmarks; its "
        "scores are stored apart from reproduction runs (source 'released') with the settings that produced them. "
        "Trailing arguments are evaluation overrides, e.g. seed=1 benchmark.limit=50.",
    )
    audit.add_argument("--matrix", default="paper_v3", help="configs/matrix/NAME.yaml (default: paper_v3, 72 cells)")
    audit.add_argument("--cell", help="comma-separated cell ids (default: every cell of the matrix)")
    audit.add_argument("--method", help="comma-separated methods")
    audit.add_argument("--base-model", help="comma-separated base models")
    audit.add_argument("--dataset", help="comma-separated datasets")
    audit.add_argument("--benchmarks", default=None, help="names or suites (default: the matrix's evaluation's)")
    audit.add_argument(
        "--generation", choices=["auto", "vllm", "transformers"], default="auto",
        help="auto (default): vllm where a CUDA device and vllm are here, else transformers",
    )  # fmt: skip
    audit.add_argument("--work-pool", default=None, help="one flow run per checkpoint on this Prefect work pool")
    audit.add_argument("--force", action="store_true", help="evaluate again checkpoints audited with these settings")
    audit.add_argument("--dry-run", action="store_true", help="print evaluations, samples and a GPU-time estimate")
    audit.add_argument("--json", action="store_true", help="also print the report (or the estimate) as JSON")
    audit.add_argument("--config", action="append", default=[], help="configs/pipeline.yaml override, repeatable")
    audit.add_argument("overrides", nargs="*", help="evaluation overrides of every checkpoint (seed=1, ...)")
    audit.set_defaults(func=_audit)
