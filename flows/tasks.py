"""Prefect tasks: each wraps one library function of ``corewarding.pipeline`` and takes plain values.

Task runs are named after their cell (``train co_rewarding_2__qwen3-8b-base__math``). Only network and I/O steps
(publish, ingest, sharing through the store, DVC bookkeeping) retry, and only on transient errors. Results are not
cached by Prefect: every step decides itself whether its work is already done.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE
from prefect.states import State

from corewarding.pipeline import alerts, dvc, steps
from corewarding.pipeline import audit as audits
from corewarding.pipeline.cells import CellPlan, Selection, plan_cell, plan_cells
from corewarding.pipeline.jobs import CellJob
from corewarding.pipeline.run_summary import CellReport, PipelineFailed, PipelineReport
from corewarding.pipeline.settings import PipelineSettings, io_retries
from corewarding.pipeline.store import sharing

log = logging.getLogger(__name__)


def _retry_if_transient(task: Any, task_run: Any, state: Any) -> bool:
    return steps.is_transient(state.result(raise_on_failure=False))


def _plans(matrix: str, cell_ids: list[str], overrides: list[str]) -> list[CellPlan]:
    return plan_cells(Selection(matrix=matrix, cells=tuple(cell_ids)), overrides)


def _job_plan(job: CellJob, evaluation: bool = False) -> CellPlan:
    return plan_cell(job.matrix, job.cell_id, job.overrides, job.eval_overrides if evaluation else ())


@task(name="reproduce-data", cache_policy=NO_CACHE)
def reproduce_data(groups: list[tuple[list[str], list[str]]], db: Path, data_dir: Path) -> dict[str, str]:
    """``dvc repro`` per group of data stages (``[(stages, cell ids), ...]``, from ``data_groups``); returns cell id
    -> error for cells whose data failed."""
    failed = dvc.reproduce_groups(Path.cwd(), {tuple(stages): cell_ids for stages, cell_ids in groups})
    steps.ingest_data_reports(db, data_dir)
    return failed


@task(name="share-data", cache_policy=NO_CACHE, retry_condition_fn=_retry_if_transient)
def share_data(store_url: str, paths: list[str]) -> int:
    """Put the cells' data files (``sharing.shared_paths``) in the shared store, for workers on other machines;
    returns files copied."""
    return sharing.share_data_files(sharing.open_store(store_url), [Path(p) for p in paths])


@task(name="fetch", cache_policy=NO_CACHE, retry_condition_fn=_retry_if_transient)
def fetch(job: CellJob) -> dict[str, Any]:
    """On the worker: the cell's data files and its run folder (newest checkpoint) from the store."""
    assert job.store_url
    training = bool({"train", "evaluate"} & set(job.steps))  # an audit reads only the released checkpoint
    return sharing.fetch_cell(sharing.open_store(job.store_url), _job_plan(job), training=training)


@task(name="train", cache_policy=NO_CACHE)
def train(job: CellJob) -> dict[str, Any]:
    return steps.train_cell(_job_plan(job)).to_dict()


@task(name="evaluate", cache_policy=NO_CACHE)
def evaluate(job: CellJob) -> dict[str, Any]:
    return steps.evaluate_cell(_job_plan(job, evaluation=True), force=job.force_evaluate).to_dict()


@task(name="publish", cache_policy=NO_CACHE, retry_condition_fn=_retry_if_transient)
def publish(job: CellJob) -> dict[str, Any]:
    return steps.publish_cell(_job_plan(job), job.push, job.org, job.publish_steps).to_dict()


@task(name="audit", cache_policy=NO_CACHE)
def audit(job: CellJob) -> dict[str, Any]:
    """The cell's released Hub checkpoint, evaluated under the matrix's protocol (``released/`` in its folder)."""
    return audits.audit_cell(_job_plan(job, evaluation=True), job.audit_benchmarks, job.force_evaluate).to_dict()


@task(name="ingest", cache_policy=NO_CACHE, retry_condition_fn=_retry_if_transient)
def ingest(matrix: str, cell_id: str, overrides: list[str], db: Path) -> dict[str, Any]:
    return steps.ingest_cell(plan_cell(matrix, cell_id, overrides), db).to_dict()


@task(name="record-dvc-stages", cache_policy=NO_CACHE, retry_condition_fn=_retry_if_transient)
def record_dvc_stages(
    matrix: str,
    cell_ids: list[str],
    overrides: list[str],
    params_file: Path,
    trained: list[str],
    evaluated: list[str],
    skipped: dict[str, list[str]],
) -> list[str]:
    """Record the steps that ran now, and the skipped ones an interrupted run finished but never recorded."""
    root = Path.cwd()
    trained = trained + dvc.unrecorded(root, "train", skipped["train"])
    evaluated = evaluated + dvc.unrecorded(root, "evaluate", skipped["evaluate"])
    return dvc.record_cells(root, params_file, _plans(matrix, cell_ids, overrides), trained, evaluated)


CELL_TASKS = {"train": train, "evaluate": evaluate, "publish": publish, "audit": audit}


def run_step(step: str, job: CellJob) -> State[Any]:
    """Run one step of the cell in this thread (Ctrl-C reaches it), named after the cell; returns its final state."""
    options: dict[str, Any] = {"task_run_name": f"{step} {job.cell_id}"}
    if step == "publish":
        options |= {
            "retries": job.retries_network if job.push else job.retries_io,
            "retry_delay_seconds": job.retry_delay_s,
        }
    return CELL_TASKS[step].with_options(**options)(job, return_state=True)  # type: ignore[no-any-return]


def outcome(state: State[Any]) -> tuple[str, Any, str | None]:
    """(status, result, error) of a finished run: done/skipped from its result, failed, or not run."""
    if state.is_completed():
        result = state.result()
        return (str(result["status"]) if isinstance(result, dict) and "status" in result else "done"), result, None
    if state.is_failed() or state.is_crashed():
        error = state.result(raise_on_failure=False)
        return "failed", None, steps.failure_text(error) if isinstance(error, BaseException) else state.message
    return "not run", None, None


def ingest_cell(report: CellReport, plan: CellPlan, settings: PipelineSettings) -> None:
    """Ingest a finished cell into the DuckDB store (the parent is its one writer), unless it failed (a failed audit
    is ingested: its record names the Hub failure); then record the attempt, finished or failed with why, so a failed
    one is never covered by the cell's older run. Then the alerts: the cell's failure, and each collapse flag its
    ingest recorded first."""
    flags = _ingest(report, plan, settings) if "ingest" in settings.steps else []
    alerter = alerts.Alerter.from_settings(settings)
    if report.failed:
        alerter.send(alerts.cell_failed(report.cell_id, report.error, report.attempt))
    for flag in flags:
        alerter.send(alerts.collapsed(flag))


def alert_data_failures(failed: dict[str, str], settings: PipelineSettings) -> None:
    """One alert per cell whose data stages failed (cell id -> error): those cells run no further step."""
    alerter = alerts.Alerter.from_settings(settings)
    for cell_id, error in failed.items():
        alerter.send(alerts.cell_failed(cell_id, f"data: {error}"))


@task(name="check-claims", cache_policy=NO_CACHE, retry_condition_fn=_retry_if_transient)
def check_claims(db: Path, claims_file: Path) -> list[dict[str, Any]]:
    """The claims checked on the store and their verdicts recorded; returns those that changed."""
    from corewarding.results.claim_history import check_claims as check  # duckdb: imported when used

    return [change.to_dict() for change in check(db, claims_file)]


def alert_claim_changes(settings: PipelineSettings) -> None:
    """After the cells are ingested: one alert per claim whose verdict changed. Only with claim alerts on (it reads
    every claim's cells); a check that fails is a warning, never a failed run."""
    alerter = alerts.Alerter.from_settings(settings)
    if "ingest" not in settings.steps or not alerter.wants(alerts.CLAIM_CHANGED) or settings.claims_file is None:
        return
    state = check_claims.with_options(**io_retries(settings))(settings.results_db, settings.claims_file,
                                                              return_state=True)  # fmt: skip
    status, changes, error = outcome(state)
    if status == "failed":
        log.warning("claims not checked, no claim alerts sent: %s", error)
        return
    for change in changes or []:
        alerter.send(alerts.claim_changed(change))


def _ingest(report: CellReport, plan: CellPlan, settings: PipelineSettings) -> list[dict[str, Any]]:
    """``ingest_cell``'s store work; returns the collapse flags the ingest recorded first."""
    flags: list[dict[str, Any]] = []
    audit_only = [step for step, status in report.steps.items() if status == "failed"] == [audits.AUDIT_STEP]
    if report.failed and not audit_only:  # a failed audit is ingested: the store lists why it was not audited
        report.record("ingest", "not run")
    else:
        state = ingest.with_options(task_run_name=f"ingest {plan.cell_id}", **io_retries(settings))(
            plan.matrix.name, plan.cell_id, list(plan.overrides), settings.results_db, return_state=True
        )
        status, result, error = outcome(state)
        report.record("ingest", status, error)
        flags = list(result.get("collapses") or []) if isinstance(result, dict) else []
    failed = report.failed and not (audit_only and report.steps.get("ingest") != "failed")  # an audit alone: finished
    try:
        steps.record_attempt(plan, settings.results_db, report.error if failed else None, report.attempt,
                             report.flow_run_id)  # fmt: skip
    except Exception as exc:  # the store is busy, full or damaged: the attempt's failure is what the report shows
        report.record("ingest", "failed", f"recording the attempt: {steps.failure_text(exc)}")
    return flags


def record_dvc(plans: list[CellPlan], settings: PipelineSettings, report: PipelineReport) -> None:
    """Record in DVC the stages that ran; a failure is kept in the report instead of ending the flow early."""
    ids = [p.cell_id for p in plans]
    state = record_dvc_stages.with_options(**io_retries(settings))(
        settings.selection.matrix, ids, list(settings.overrides), settings.params_file,
        report.ran("train"), report.ran("evaluate"),
        {"train": report.skipped("train"), "evaluate": report.skipped("evaluate")}, return_state=True,
    )  # fmt: skip
    _, result, error = outcome(state)
    report.recorded, report.dvc_error = (result or []), error


def finish(report: PipelineReport) -> dict[str, Any]:
    """The run's report; raises PipelineFailed (the flow run fails, naming the cells) when anything failed."""

    if not report.ok:
        raise PipelineFailed(report)
    return report.to_dict()
