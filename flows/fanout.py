"""Cells on a work pool: one flow run of the ``corewarding-cell/<pool>`` deployment per cell, watched until each
ends; a run whose worker died (its lease in the store stopped changing) is marked crashed and started again, as is
one that crashed (its process killed) or failed without a report; it resumes from the newest checkpoint in the
store. Only a report that carries the flow run's own id counts. Interrupted, it cancels its cell runs."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import UUID

from prefect.client.orchestration import SyncPrefectClient, get_client
from prefect.client.schemas.filters import (
    FlowRunFilter,
    FlowRunFilterId,
    TaskRunFilter,
    TaskRunFilterState,
    TaskRunFilterStateType,
)
from prefect.client.schemas.objects import FlowRun, StateType
from prefect.deployments import run_deployment
from prefect.states import Cancelled, Cancelling, Crashed, State

from corewarding.pipeline.cells import CellPlan
from corewarding.pipeline.jobs import CellJob, cell_job
from corewarding.pipeline.pool_key import load_keys
from corewarding.pipeline.run_summary import CellFailed, CellReport
from corewarding.pipeline.settings import PipelineSettings
from corewarding.pipeline.store import sharing
from corewarding.pipeline.store.leases import LeaseWatch
from corewarding.pipeline.versions import code_version
from flows import tasks

log = logging.getLogger(__name__)
CELL_FLOW = "corewarding-cell"
_PAGE = 200  # the most flow runs the Prefect API returns at once
_UNFINISHED = [StateType.RUNNING, StateType.PENDING, StateType.SCHEDULED]


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
    name = attempt_name(plan.cell_id, number)
    run = run_deployment(
        f"{CELL_FLOW}/{pool}", parameters={"cell_id": plan.cell_id, "job": job.to_parameters(), "attempt": number},
        flow_run_name=name, timeout=0, as_subflow=True,
    )  # fmt: skip
    log.info("%s: flow run %s on work pool %s", name, run.id, pool)
    return _Attempt(plan, job, number, run.id)


def attempt_name(cell_id: str, number: int) -> str:
    """A cell run's name: ``<cell>`` first, ``<cell>#<n>`` when started again."""
    return cell_id if number == 1 else f"{cell_id}#{number}"


def own_report(store_url: str, plan: CellPlan, run: FlowRun) -> CellReport | None:
    """The report in the store if the flow run ``run`` wrote it (its id is in it); None for none or another run's
    (a stale report of an earlier pipeline run or attempt is never read as this run's)."""
    report = sharing.read_cell_report(sharing.open_store(store_url), plan.cell_id, str(plan.run_dir))
    if report is None or report.flow_run_id != str(run.id) or report.steps == {}:
        return None
    return report


def judge(attempt: _Attempt, run: FlowRun, store_url: str) -> tuple[CellReport | None, str]:
    """An ended cell run: (its own report, "") when it counts (Completed, or Failed with its report naming the step
    that failed), else (None, why) for a run that crashed, failed without a report, or was cancelled."""
    state = run.state
    report = own_report(store_url, attempt.plan, run)
    what = f"cell run {run.name} ended {run.state_name}" + (f": {state.message}" if state and state.message else "")
    if state is None or state.is_cancelled():
        return None, f"cell run {run.name} was cancelled"
    if report is None:
        return None, what + " (no report of this flow run in the store)"
    if state.is_completed() or (state.is_failed() and report.failed):
        return report, ""
    return None, what


def _collect(report: CellReport, plan: CellPlan, run: FlowRun, store_url: str, settings: PipelineSettings) -> None:
    """A cell run that counts: its small files from the store, then ingestion here."""
    report.attempt = run.name
    if not report.failed:
        sharing.pull_results(sharing.open_store(store_url), plan)
    tasks.ingest_cell(report, plan, settings)


def _stale(attempt: _Attempt, run: FlowRun, watch: LeaseWatch, store_url: str) -> bool:
    if not (run.state and run.state.is_running()):
        return False
    lease = sharing.open_store(store_url).read_lease(attempt.plan.cell_id)
    return watch.stale(str(attempt.run_id), lease, time.monotonic())


def run_on_pool(plans: list[CellPlan], settings: PipelineSettings, store_url: str | None) -> list[CellReport]:
    """Start every cell on the work pool, wait for all; start again (up to ``cells.max_attempts`` runs) a cell whose
    run crashed, failed without its report, or whose worker died; cancel all if interrupted. A cell counts as done
    only from a report that its own flow run of this pipeline run wrote."""
    assert settings.work_pool and store_url
    code = code_version(Path.cwd())  # the parent's checkout: a worker with other code or config refuses the cell
    key = load_keys()[0]  # each job signed: a worker runs no other (docs/work-pool.md#the-pool-key)
    active: dict[str, _Attempt] = {}
    watch = LeaseWatch(settings.lease_timeout_s)
    reports: list[CellReport] = []
    try:
        for plan in plans:  # inside the try: an interrupt between two submissions cancels the runs made so far
            job = cell_job(plan, settings, store_url, code).signed(key)
            active[plan.cell_id] = _submit(plan, job, settings.work_pool, 1)
        with get_client(sync_client=True) as client:  # one client, one request per look: the server serves workers
            while active:
                time.sleep(settings.poll_s)
                runs = read_runs(client, {cell_id: attempt.run_id for cell_id, attempt in active.items()})
                for cell_id, run in runs.items():
                    attempt = active[cell_id]
                    if run.state and run.state.is_final():
                        report, why = judge(attempt, run, store_url)
                        if report is not None:
                            del active[cell_id]
                            _collect(report, attempt.plan, run, store_url, settings)
                            reports.append(report)
                            continue
                        retry = not (run.state and run.state.is_cancelled())
                        if run.state and run.state.is_crashed():  # its process died: its task runs with it
                            crash_task_runs(client, run.id, why)
                    elif _stale(attempt, run, watch, store_url):
                        why = f"cell run {run.name}: its worker stopped (lease went stale)"
                        client.set_flow_run_state(attempt.run_id, Crashed(message=why), force=True)
                        crash_task_runs(client, attempt.run_id, why)
                        retry = True
                    else:
                        continue
                    if retry and attempt.number < settings.max_attempts:
                        log.warning("%s; starting it again as %s", why, attempt_name(cell_id, attempt.number + 1))
                        active[cell_id] = _submit(attempt.plan, attempt.job, settings.work_pool, attempt.number + 1)
                    else:
                        del active[cell_id]
                        lost = _lost(attempt.plan, attempt.job, f"{why} (attempt {attempt.number} of "
                                     f"{settings.max_attempts})")  # fmt: skip
                        lost.attempt = run.name
                        tasks.ingest_cell(lost, attempt.plan, settings)
                        reports.append(lost)
    except BaseException:
        cancel_runs({cell_id: attempt.run_id for cell_id, attempt in active.items()})
        raise
    return reports


def crash_task_runs(client: SyncPrefectClient, run_id: UUID, message: str) -> int:
    """Mark the task runs that a dead cell run left Running or Pending as Crashed (nobody else will); returns how
    many."""
    unfinished = TaskRunFilter(state=TaskRunFilterState(type=TaskRunFilterStateType(any_=_UNFINISHED)))
    runs = client.read_task_runs(
        flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[run_id])), task_run_filter=unfinished
    )
    for task_run in runs:
        client.set_task_run_state(task_run.id, Crashed(message=message), force=True)
    return len(runs)


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
