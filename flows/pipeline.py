"""The corewarding pipeline flow: data, then one flow run per selected cell (train -> evaluate -> publish), each
ingested into DuckDB by this flow as it finishes.

Without a work pool the cells run here, one after another, as sub-flow runs of this process. With one
(``work_pool``), every cell is a flow run of the ``corewarding-cell/<pool>`` deployment that the pool's workers take,
one per GPU machine; results come back through the shared store. A failed cell does not stop the others, and the
run ends failed, naming the cells that failed. Run it with ``corewarding pipeline run``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import flow
from prefect.runtime import flow_run

from corewarding.pipeline.cells import CellPlan, all_data_stages, data_groups, plan_cells
from corewarding.pipeline.jobs import cell_job
from corewarding.pipeline.options import with_run_options
from corewarding.pipeline.run_summary import CellReport, PipelineReport
from corewarding.pipeline.settings import PipelineSettings, load_settings, should_record
from corewarding.pipeline.store import sharing
from flows import fanout, tasks
from flows.cell import cell
from flows.from_api import scheduled_settings, started_from_api


def _run_here(plans: list[CellPlan], settings: PipelineSettings) -> list[CellReport]:
    """Each cell as a sub-flow run of this process, in order; Ctrl-C stops the one running and ends the run."""
    reports = []
    for plan in plans:
        job = cell_job(plan, settings, None)
        state = cell(plan.cell_id, job.to_parameters(), return_state=True)  # type: ignore[call-overload]
        report = fanout.cell_report(plan, job, state)
        tasks.ingest_cell(report, plan, settings)
        reports.append(report)
    return reports


@flow(name="corewarding-pipeline")
@with_run_options
def pipeline(*, config: list[str] | None = None, schedule: str | None = None, **options: Any) -> dict[str, Any]:
    """Run the selected cells of a matrix. Its parameters are the run options (``RunOptions`` in
    corewarding/pipeline/options.py: matrix, methods, steps, push, work_pool...; None: ``configs/pipeline.yaml``'s
    value), ``config`` (``configs/pipeline.yaml`` overrides) and ``schedule``. A run started through the Prefect API
    (a schedule's) takes only ``schedule`` and ``work_pool``; its settings come from this checkout's configs.

    Args:
        config: configs/pipeline.yaml overrides (key=value), applied before the options
        schedule: a scheduled run's name in configs/pipeline.yaml: deployments (its options are read there)
    """
    if started_from_api():
        settings = scheduled_settings(dict(flow_run.get_parameters()))
    else:
        settings = load_settings(config or [], **options)
    plans = plan_cells(settings.selection, settings.overrides, settings.eval_overrides)
    store_url = sharing.store_url(settings, Path.cwd())
    report = PipelineReport(settings.selection.matrix, [])
    data_failed: dict[str, str] = {}
    if "data" in settings.steps:  # the tasks get what the plans say, not the plans to compose again (1-2 s each)
        report.data_stages = all_data_stages(plans)
        groups = [(list(stages), cell_ids) for stages, cell_ids in data_groups(plans).items()]
        data_failed = tasks.reproduce_data(groups, settings.results_db, settings.data_dir)
        tasks.alert_data_failures(data_failed, settings)
    ready = [p for p in plans if p.cell_id not in data_failed]
    if store_url and ready and {"train", "evaluate"} & set(settings.steps):
        tasks.share_data(store_url, [str(path) for path in sharing.shared_paths(ready)])
    done = fanout.run_on_pool(ready, settings, store_url) if settings.work_pool else _run_here(ready, settings)
    report.cells = fanout.in_plan_order(plans, done, data_failed, settings.steps)
    tasks.alert_claim_changes(settings)
    if should_record(settings, Path.cwd()):
        tasks.record_dvc(plans, settings, report)
    return tasks.finish(report)
