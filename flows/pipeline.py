"""The corewarding pipeline flow: data, then per selected cell train -> evaluate -> ingest -> publish.

Cells run side by side, their GPU steps limited by the GPU tag's concurrency limit; a failed cell does not stop
the others, and the run ends failed, naming the cells that failed. Run it with ``corewarding pipeline run``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import flow

from corewarding.pipeline.cells import plan_cells
from corewarding.pipeline.dvc import is_dvc_repo
from corewarding.pipeline.report import PipelineReport
from corewarding.pipeline.settings import load_settings
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
    selection = (settings.selection.matrix, [p.cell_id for p in plans])
    report = PipelineReport(settings.selection.matrix, [])
    tasks.ensure_gpu_limit(settings.gpu_tag, settings.gpu_concurrency)
    record = settings.record_dvc and is_dvc_repo(Path.cwd())
    if record:
        tasks.list_cells_for_dvc(*selection, list(settings.overrides), settings.params_file)
    if "data" in settings.steps:
        report.data_stages = tasks.reproduce_data(
            *selection, list(settings.overrides), settings.results_db, settings.data_dir
        )
    submitted = [(plan, tasks.submit_cell(plan, settings)) for plan in plans]
    report.cells = [tasks.collect(plan, futures) for plan, futures in submitted]
    finished = report.trained_and_evaluated()
    if record and {"train", "evaluate"} <= set(settings.steps) and finished:
        report.recorded = tasks.record_dvc_stages(finished)
    return tasks.finish(report)
