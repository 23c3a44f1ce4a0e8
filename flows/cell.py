"""One cell's flow run: train, evaluate every saved step, publish, named after the cell.

Run in the parent's process (no work pool) or by a work pool's worker (``corewarding-cell/<pool>`` deployment). With
a shared store, it first fetches the cell's data and run folder (an interrupted run resumes from the newest
checkpoint in the store), keeps a lease and pushes each new checkpoint while it works, and pushes the run folder
and its report at the end, whatever happened. The Prefect UI shows the cell's metrics as a markdown artifact.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from prefect import flow
from prefect.artifacts import create_markdown_artifact
from prefect.runtime import flow_run

from corewarding.pipeline.cells import plan_cell
from corewarding.pipeline.job_checks import check_job, signed_job, worker_keys, worker_store
from corewarding.pipeline.jobs import CellJob
from corewarding.pipeline.run_summary import CellFailed, CellReport, cell_markdown
from corewarding.pipeline.store import sharing
from corewarding.pipeline.versions import check_same, code_version, config_hash
from corewarding.schemas import ConfigError, without_values
from flows import tasks
from flows.from_api import started_from_api


def _artifact_key(cell_id: str) -> str:
    """Prefect artifact keys take lowercase letters, digits and dashes."""
    return "cell-" + "".join(c if c.isalnum() else "-" for c in cell_id.lower())


def _run_name() -> str:
    """``<cell>`` for a cell's first flow run, ``<cell>#<n>`` for the n-th (a retry after its run crashed)."""
    params = flow_run.get_parameters()
    attempt = int(params.get("attempt", 1))
    return str(params["cell_id"]) if attempt <= 1 else f"{params['cell_id']}#{attempt}"


@flow(name="corewarding-cell", flow_run_name=_run_name)
def cell(cell_id: str, job: dict[str, Any], attempt: int = 1) -> dict[str, Any]:
    """Train, evaluate and publish one cell; raises CellFailed (the run fails, naming the step) when a step failed,
    JobRefused or VersionMismatch (before any work) for a job that is not a parent's (docs/work-pool.md) or whose
    config or code is not this checkout's."""
    from_api = started_from_api()  # a worker's run: its job came through the Prefect API
    if from_api:  # before anything is read from it: signed by the pool's key, every field allowed
        spec = signed_job({**job, "cell_id": cell_id}, worker_keys())
        check_job(spec, worker_store())
    else:
        spec = CellJob.from_parameters({**job, "cell_id": cell_id})
    try:
        plan = plan_cell(spec.matrix, cell_id, spec.overrides)
    except ConfigError as exc:  # a job run's message names the key and the rule, never a value (docs/work-pool.md)
        if not from_api:
            raise
        raise ConfigError(f"{cell_id}: {without_values(str(exc))}") from None
    config, code = config_hash(plan.cfg), code_version(Path.cwd())
    if from_api:
        check_same(cell_id, spec.config_hash, spec.code_version, config, code, f"{sharing.worker_name()}")
    store = sharing.open_store(spec.store_url) if spec.store_url else None
    run_id = str(flow_run.get_id())
    report = CellReport(cell_id, str(plan.run_dir), worker=sharing.worker_name(), flow_run_id=run_id)
    report.attempt, report.config_hash, report.code_version = flow_run.get_name(), config, code
    holder = {"worker": report.worker, "flow_run_id": run_id}
    with contextlib.ExitStack() as stack:
        if store is not None:  # first: the parent sees this run alive from its start
            stack.enter_context(sharing.LeaseKeeper(store, cell_id, holder, spec.sync_interval_s))
        if store is not None:
            fetched = tasks.fetch.with_options(task_run_name=f"fetch {cell_id}")(spec, return_state=True)
            status, _, error = tasks.outcome(fetched)
            stack.callback(sharing.write_cell_report, store, report)  # last: the parent reads it when the run ends
            if status == "failed":
                report.record("fetch", status, error)  # nothing local is pushed over the store's newer files
            else:  # each new checkpoint while it works, the run folder at the end, whatever happened
                stack.enter_context(sharing.syncing(store, cell_id, plan.run_dir, holder, spec.sync_interval_s))
        for step in spec.steps:
            if report.failed:
                report.record(step, "not run")
                continue
            status, _, error = tasks.outcome(tasks.run_step(step, spec))
            report.record(step, status, error)
    create_markdown_artifact(markdown=cell_markdown(report), key=_artifact_key(cell_id), description=f"cell {cell_id}")
    if report.failed:
        raise CellFailed(report)
    return report.__dict__
