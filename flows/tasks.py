"""Prefect tasks: each wraps one library function of ``corewarding.pipeline`` and takes plain values.

GPU work (train, evaluate) carries the GPU tag, whose concurrency limit serialises it; only network and I/O steps
(publish, ingest, DVC bookkeeping) retry, and only on transient errors. Results are not cached by Prefect: every
step decides itself whether its work is already done.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE
from prefect.client.orchestration import get_client
from prefect.futures import PrefectFuture

from corewarding.pipeline import dvc, steps
from corewarding.pipeline.cells import CellPlan, Selection, data_groups, plan_cell, plan_cells
from corewarding.pipeline.report import CellReport, PipelineFailed, PipelineReport
from corewarding.pipeline.settings import PipelineSettings, io_retries


def _retry_if_transient(task: Any, task_run: Any, state: Any) -> bool:
    return steps.is_transient(state.result(raise_on_failure=False))


def ensure_gpu_limit(tag: str, limit: int) -> None:
    """Create or update the concurrency limit of the GPU tag on the Prefect server."""
    with get_client(sync_client=True) as client:
        client.upsert_global_concurrency_limit_by_name(f"tag:{tag}", limit)


def _plans(matrix: str, cell_ids: list[str], overrides: list[str]) -> list[CellPlan]:
    return plan_cells(Selection(matrix=matrix, cells=tuple(cell_ids)), overrides)


@task(name="reproduce-data", cache_policy=NO_CACHE)
def reproduce_data(matrix: str, cell_ids: list[str], overrides: list[str], db: Path, data_dir: Path) -> dict[str, str]:
    """``dvc repro`` per group of data stages; returns cell id -> error for cells whose data failed."""
    failed = dvc.reproduce_groups(Path.cwd(), data_groups(_plans(matrix, cell_ids, overrides)))
    steps.ingest_data_reports(db, data_dir)
    return failed


@task(name="train", cache_policy=NO_CACHE)
def train(matrix: str, cell_id: str, overrides: list[str]) -> dict[str, Any]:
    return steps.train_cell(plan_cell(matrix, cell_id, overrides)).to_dict()


@task(name="evaluate", cache_policy=NO_CACHE)
def evaluate(matrix: str, cell_id: str, overrides: list[str], eval_overrides: list[str], force: bool) -> dict[str, Any]:
    return steps.evaluate_cell(plan_cell(matrix, cell_id, overrides, eval_overrides), force=force).to_dict()


@task(name="ingest", cache_policy=NO_CACHE, retry_condition_fn=_retry_if_transient)
def ingest(matrix: str, cell_id: str, overrides: list[str], db: Path) -> dict[str, Any]:
    return steps.ingest_cell(plan_cell(matrix, cell_id, overrides), db).to_dict()


@task(name="publish", cache_policy=NO_CACHE, retry_condition_fn=_retry_if_transient)
def publish(matrix: str, cell_id: str, overrides: list[str], push: bool, org: str | None, which: str) -> dict[str, Any]:
    return steps.publish_cell(plan_cell(matrix, cell_id, overrides), push, org, which).to_dict()


@task(name="record-dvc-stages", cache_policy=NO_CACHE, retry_condition_fn=_retry_if_transient)
def record_dvc_stages(
    matrix: str, cell_ids: list[str], overrides: list[str], params_file: Path, trained: list[str], evaluated: list[str]
) -> list[str]:
    return dvc.record_cells(Path.cwd(), params_file, _plans(matrix, cell_ids, overrides), trained, evaluated)


def submit_cell(plan: CellPlan, settings: PipelineSettings) -> dict[str, PrefectFuture[Any]]:
    """Submit the cell's steps in order, each waiting for the one before; returns step -> future."""
    args = (plan.matrix.name, plan.cell_id, list(plan.overrides))
    gpu = {"tags": [settings.gpu_tag]}
    io = io_retries(settings)
    network = {**io, "retries": settings.retries_network} if settings.push else io
    calls = {
        "train": lambda wait: train.with_options(**gpu).submit(*args, wait_for=wait),
        "evaluate": lambda wait: evaluate.with_options(**gpu).submit(
            *args, list(plan.eval_overrides), settings.force_evaluate, wait_for=wait
        ),
        "ingest": lambda wait: ingest.with_options(**io).submit(*args, settings.results_db, wait_for=wait),
        "publish": lambda wait: publish.with_options(**network).submit(
            *args, settings.push, settings.org, settings.publish_steps, wait_for=wait
        ),
    }
    futures: dict[str, PrefectFuture[Any]] = {}
    for step, call in calls.items():
        if step in settings.steps:
            futures[step] = call(list(futures.values())[-1:])
    return futures


def _outcome(future: PrefectFuture[Any]) -> tuple[str, Any, str | None]:
    """(status, result, error) of a finished task run: done/skipped from its result, failed, or not run."""
    future.wait()
    state = future.state
    if state.is_completed():
        result = future.result()
        return (str(result["status"]) if isinstance(result, dict) and "status" in result else "done"), result, None
    if state.is_failed() or state.is_crashed():
        error = state.result(raise_on_failure=False)
        return "failed", None, f"{type(error).__name__}: {error}" if isinstance(error, BaseException) else state.message
    return "not run", None, None


def run_cells(plans: list[CellPlan], settings: PipelineSettings, data_failed: dict[str, str]) -> list[CellReport]:
    """Submit every cell whose data is ready, then wait for all; a cell whose data failed is reported, not run."""
    submitted = {p.cell_id: submit_cell(p, settings) for p in plans if p.cell_id not in data_failed}
    reports = []
    for plan in plans:
        report = CellReport(plan.cell_id, str(plan.run_dir))
        if plan.cell_id in data_failed:
            report.record("data", "failed", data_failed[plan.cell_id])
            for step in settings.steps:
                if step != "data":
                    report.record(step, "not run")
        for step, future in submitted.get(plan.cell_id, {}).items():
            status, _, error = _outcome(future)
            report.record(step, status, error)
        reports.append(report)
    return reports


def record_dvc(plans: list[CellPlan], settings: PipelineSettings, report: PipelineReport) -> None:
    """Record in DVC the stages that ran; a failure is kept in the report instead of ending the flow early."""
    ids = [p.cell_id for p in plans]
    future = record_dvc_stages.with_options(**io_retries(settings)).submit(
        settings.selection.matrix, ids, list(settings.overrides), settings.params_file,
        report.ran("train"), report.ran("evaluate"),
    )  # fmt: skip
    _, result, error = _outcome(future)
    report.recorded, report.dvc_error = (result or []), error


def finish(report: PipelineReport) -> dict[str, Any]:
    """The run's report; raises PipelineFailed (the flow run fails, naming the cells) when anything failed."""
    if not report.ok:
        raise PipelineFailed(report)
    return report.to_dict()
