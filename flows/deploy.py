"""Scheduled deployments of the pipeline flow (``configs/pipeline.yaml: deployments``), for a work pool or served."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from prefect.client.orchestration import get_client
from prefect.client.schemas.actions import WorkPoolCreate
from prefect.exceptions import ObjectNotFound
from prefect.schedules import Cron

from corewarding.pipeline.settings import deployment_specs, load_settings
from flows.pipeline import pipeline
from flows.tasks import ensure_gpu_limit

log = logging.getLogger(__name__)

ENTRYPOINT = "flows/pipeline.py:pipeline"


def _ensure_process_pool(name: str) -> None:
    from prefect.workers.process import ProcessWorker

    with get_client(sync_client=True) as client:
        try:
            client.read_work_pool(name)
        except ObjectNotFound:
            template = ProcessWorker.get_default_base_job_template()
            client.create_work_pool(WorkPoolCreate(name=name, type="process", base_job_template=template))
            log.info("created process work pool %s", name)


def _deployment_kwargs(name: str, spec: dict[str, Any], config: Sequence[str]) -> dict[str, Any]:
    parameters = dict(spec.get("parameters") or {})
    if config:
        parameters["config"] = [*parameters.get("config", []), *config]
    return {
        "name": name,
        "description": spec.get("description"),
        "schedules": [Cron(str(spec["cron"]), timezone=str(spec.get("timezone") or "UTC"))],
        "parameters": parameters,
        "tags": ["corewarding"],
        "concurrency_limit": 1,  # a nightly run still going when the next is due is not doubled
    }


def deploy_to_pool(work_pool: str, root: Path, config: Sequence[str] = (), create_pool: bool = True) -> list[str]:
    """Register every configured deployment for ``work_pool`` (workers run the flow from ``root``); returns ids."""
    from prefect import deploy

    settings = load_settings(config)
    ensure_gpu_limit(settings.gpu_tag, settings.gpu_concurrency)
    if create_pool:
        _ensure_process_pool(work_pool)
    source = pipeline.from_source(source=str(root.resolve()), entrypoint=ENTRYPOINT)
    deployments = [
        source.to_deployment(**_deployment_kwargs(name, spec, config), work_pool_name=work_pool)
        for name, spec in deployment_specs(config).items()
    ]
    ids = deploy(*deployments, work_pool_name=work_pool, build=False, push=False, print_next_steps_message=False,
                 ignore_warnings=True)  # fmt: skip
    return [str(i) for i in ids]


def serve(config: Sequence[str] = ()) -> None:
    """Register the configured deployments and run their flow runs in this process's children until stopped."""
    from prefect import serve as prefect_serve

    settings = load_settings(config)
    ensure_gpu_limit(settings.gpu_tag, settings.gpu_concurrency)
    prefect_serve(
        *(
            pipeline.to_deployment(**_deployment_kwargs(name, spec, config))
            for name, spec in deployment_specs(config).items()
        )
    )
