"""Cells on a work pool: one flow run of the ``corewarding-cell/<pool>`` deployment per cell, watched until each
ends; a run whose worker died (its lease in the store stopped changing) is marked crashed and started again, and
resumes on another worker from the newest checkpoint in the store. Interrupted, it cancels its cell runs."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from prefect.client.orchestration import SyncPrefectClient, get_client
from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId
from prefect.client.schemas.objects import FlowRun
from prefect.deployments import run_deployment
from prefect.states import Cancelled, Cancelling, Crashed, State

from corewarding.pipeline import sharing
from corewarding.pipeline.cells import CellPlan
from corewarding.pipeline.jobs import CellJob, cell_job
from corewarding.pipeline.leases import LeaseWatch
from corewarding.pipeline.report import CellFailed, CellReport
from corewarding.pipeline.settings import PipelineSettings
from flows import tasks

log = logging.getLogger(__name__)
CELL_FLOW = "corewarding-cell"
_PAGE = 200  # the most flow runs the Prefect API returns at once


def cell_report(plan: CellPlan, job: CellJob, state: State[Any]) -> CellReport:
    """The report of a cell run in this process: its return value, its CellFailed, or a crash."""
    status, result, error = tasks.outcome(state)
    if status != "failed":
        return CellReport(**result) if isinstance(result, dict) else _lost(plan, job, f"cell run ended {state.type}")
    failure = state.result(raise_on_failure=False)
    return failure.report if isinstance(failure, CellFailed) else _lost(plan, job, error or "cell run failed")


def _lost(plan: CellPlan, job: CellJob, error: str) -> CellReport:
    report = CellReport(plan.cell_id, str(plan.run_dir), error=error)
    report.steps = dict.fromkeys(job.steps, "failed")
    return report


def in_plan_order(
    plans: list[CellPlan], done: list[CellReport], data_failed: dict[str, str], steps: tuple[str, ...]
) -> list[CellReport]:
    """Every planned cell's report in the matrix's order; a cell whose data failed is reported, not run."""
    by_id = {r.cell_id: r for r in done}
    reports = []
    for plan in plans:
        if plan.cell_id in data_failed:
            report = CellReport(plan.cell_id, str(plan.run_dir))
            report.record("data", "failed", data_failed[plan.cell_id])
            for step in steps:
                if step != "data":
                    report.record(step, "not run")
            reports.append(report)
        elif plan.cell_id in by_id:
            reports.append(by_id[plan.cell_id])
    return reports


@dataclass
class _Attempt:
    plan: CellPlan
    job: CellJob
    number: int
    run_id: UUID


def _submit(plan: CellPlan, job: CellJob, pool: str, number: int) -> _Attempt:
    name = plan.cell_id if number == 1 else f"{plan.cell_id} (attempt {number})"
    run = run_deployment(
        f"{CELL_FLOW}/{pool}", parameters={"cell_id": plan.cell_id, "job": job.to_parameters()},
        flow_run_name=name, timeout=0, as_subflow=True,
    )  # fmt: skip
    log.info("%s: flow run %s on work pool %s", name, run.id, pool)
    return _Attempt(plan, job, number, run.id)


def _collect(attempt: _Attempt, run: FlowRun, store_url: str, settings: PipelineSettings) -> CellReport:
    """A finished cell run: its report and small files from the store, then ingestion here."""
    store = sharing.open_store(store_url)
    report = sharing.read_cell_report(store, attempt.plan.cell_id, str(attempt.plan.run_dir))
    if report is None or report.steps == {} or not run.state or not run.state.is_final():
        report = _lost(
            attempt.plan, attempt.job, f"cell run {run.name} ended {run.state_name}: {run.state and run.state.message}"
        )
    elif run.state.is_cancelled():
        report = _lost(attempt.plan, attempt.job, f"cell run {run.name} was cancelled")
    else:
        sharing.pull_results(store, attempt.plan)
    tasks.ingest_cell(report, attempt.plan, settings)
    return report


def _stale(attempt: _Attempt, run: FlowRun, watch: LeaseWatch, store_url: str) -> bool:
    if not (run.state and run.state.is_running()):
        return False
    lease = sharing.open_store(store_url).read_lease(attempt.plan.cell_id)
    return watch.stale(str(attempt.run_id), lease, time.monotonic())


def run_on_pool(plans: list[CellPlan], settings: PipelineSettings, store_url: str | None) -> list[CellReport]:
    """Start every cell on the work pool, wait for all; retry a cell whose worker died; cancel all if interrupted."""
    assert settings.work_pool and store_url
    active: dict[str, _Attempt] = {}
    watch = LeaseWatch(settings.lease_timeout_s)
    reports: list[CellReport] = []
    try:
        for plan in plans:  # inside the try: an interrupt between two submissions cancels the runs made so far
            active[plan.cell_id] = _submit(plan, cell_job(plan, settings, store_url), settings.work_pool, 1)
        with get_client(sync_client=True) as client:  # one client, one request per look: the server serves workers
            while active:
                time.sleep(settings.poll_s)
                runs = read_runs(client, {cell_id: attempt.run_id for cell_id, attempt in active.items()})
                for cell_id, run in runs.items():
                    attempt = active[cell_id]
                    if run.state and run.state.is_final():
                        del active[cell_id]
                        reports.append(_collect(attempt, run, store_url, settings))
                    elif _stale(attempt, run, watch, store_url):
                        client.set_flow_run_state(
                            attempt.run_id, Crashed(message="its worker stopped (lease went stale)"), force=True
                        )
                        if attempt.number < settings.max_attempts:
                            log.warning("%s: its worker stopped; starting it again", cell_id)
                            active[cell_id] = _submit(attempt.plan, attempt.job, settings.work_pool, attempt.number + 1)
                        else:
                            del active[cell_id]
                            reports.append(
                                _lost(attempt.plan, attempt.job, f"its worker stopped {attempt.number} time(s)")
                            )
    except BaseException:
        cancel_runs({cell_id: attempt.run_id for cell_id, attempt in active.items()})
        raise
    return reports


def read_runs(client: SyncPrefectClient, run_ids: dict[str, UUID]) -> dict[str, FlowRun]:
    """The flow runs of these cells (cell id -> run id), read in one request per 200 (the API's page limit)."""
    ids = list(run_ids.values())
    found: dict[UUID, FlowRun] = {}
    for start in range(0, len(ids), _PAGE):
        page = FlowRunFilter(id=FlowRunFilterId(any_=ids[start : start + _PAGE]))
        found.update((run.id, run) for run in client.read_flow_runs(flow_run_filter=page, limit=_PAGE))
    missing = [cell_id for cell_id, run_id in run_ids.items() if run_id not in found]
    if missing:
        raise RuntimeError(f"cell runs deleted from the Prefect server while the pipeline waited: {', '.join(missing)}")
    return {cell_id: found[run_id] for cell_id, run_id in run_ids.items()}


def cancel_runs(run_ids: dict[str, UUID]) -> None:
    """Stop these cell runs (cell id -> run id): one not started yet is cancelled at once, a running one is left to
    its worker to kill."""
    if not run_ids:
        return
    stopped = 0
    with get_client(sync_client=True) as client:
        for run in read_runs(client, run_ids).values():  # one request, not one per cell: Ctrl-C must end quickly
            if run.state and run.state.is_final():
                continue
            started = bool(run.state and run.state.is_running())
            state = Cancelling if started else Cancelled
            client.set_flow_run_state(run.id, state(message="the pipeline run was interrupted"), force=True)
            stopped += 1
    log.warning("cancelled %d cell run(s) (%d had ended)", stopped, len(run_ids) - stopped)
