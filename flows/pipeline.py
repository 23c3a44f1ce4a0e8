"""The corewarding pipeline flow: data, then per selected cell train -> evaluate -> ingest -> publish.

Cells run side by side, their GPU steps limited by the GPU tag's concurrency limit; a failed cell does not stop
the others, and the run ends failed, naming the cells that failed. Run it with ``corewarding pipeline run``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import flow

from corewarding.pipeline.cells import all_data_stages, plan_cells
from corewarding.pipeline.report import PipelineReport
from corewarding.pipeline.settings import load_settings, should_record
from flows import tasks


@flow(name="corewarding-pipeline")
def pipeline(
    matrix: str | None = None,
    methods: list[str] | None = None,
    base_models: list[str] | None = None,
    datasets: list[str] | None = None,
    cells: list[str] | None = None,
    steps: list[str] | None = None,
    overrides: list[str] | None = None,
    eval_overrides: list[str] | None = None,
    push: bool | None = None,
    force_evaluate: bool | None = None,
    config: list[str] | None = None,
) -> dict[str, Any]:
    """Run the selected cells of a matrix (``configs/pipeline.yaml`` holds the defaults of every parameter)."""
    settings = load_settings(
        config or [], matrix=matrix, methods=methods, base_models=base_models, datasets=datasets, cells=cells,
        steps=steps, overrides=overrides, eval_overrides=eval_overrides, push=push, force_evaluate=force_evaluate,
    )  # fmt: skip
    plans = plan_cells(settings.selection, settings.overrides, settings.eval_overrides)
    report = PipelineReport(settings.selection.matrix, [])
    tasks.ensure_gpu_limit(settings.gpu_tag, settings.gpu_concurrency)
    data_failed: dict[str, str] = {}
    if "data" in settings.steps:
        report.data_stages = all_data_stages(plans)
        ids = [p.cell_id for p in plans]
        data_failed = tasks.reproduce_data(
            settings.selection.matrix, ids, list(settings.overrides), settings.results_db, settings.data_dir
        )
    report.cells = tasks.run_cells(plans, settings, data_failed)
    if should_record(settings, Path.cwd()):
        tasks.record_dvc(plans, settings, report)
    return tasks.finish(report)
