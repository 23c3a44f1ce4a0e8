"""Deployments: the scheduled pipeline runs (``configs/pipeline.yaml: deployments``) and, per work pool that runs
cells, the ``corewarding-cell/<pool>`` deployment whose flow runs the pool's workers take, one per GPU machine."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from prefect import deploy
from prefect import serve as prefect_serve
from prefect.client.orchestration import get_client
from prefect.client.schemas.actions import DeploymentUpdate, WorkPoolCreate
from prefect.exceptions import ObjectNotFound
from prefect.schedules import Cron
from prefect.workers.process import ProcessWorker

from corewarding.pipeline.settings import deployment_specs
from corewarding.runtime.worker import CELL_ENGINE_COMMAND, ENTRYPOINTS, PIPELINE_ENGINE_COMMAND, PULL_STEP
from corewarding.schemas import ConfigError
from flows.cell import cell
from flows.pipeline import pipeline

log = logging.getLogger(__name__)

ENTRYPOINT = ENTRYPOINTS["pipeline"]
CELL_ENTRYPOINT = ENTRYPOINTS["cell"]


def _ensure_process_pool(name: str) -> None:
    with get_client(sync_client=True) as client:
        try:
            client.read_work_pool(name)
        except ObjectNotFound:
            template = ProcessWorker.get_default_base_job_template()
            client.create_work_pool(WorkPoolCreate(name=name, type="process", base_job_template=template))
            log.info("created process work pool %s", name)


def _deployment_kwargs(name: str, spec: dict[str, Any], cell_pool: str | None = None) -> dict[str, Any]:
    # the run names its schedule, nothing else: the checkout that runs it reads the rest from its own configs
    parameters: dict[str, Any] = {"schedule": name}
    if cell_pool:
        parameters["work_pool"] = cell_pool
    return {
        "name": name,
        "description": spec.get("description"),
        "schedules": [Cron(str(spec["cron"]), timezone=str(spec.get("timezone") or "UTC"))],
        "parameters": parameters,
        "tags": ["corewarding"],
        "concurrency_limit": 1,  # a nightly run still going when the next is due is not doubled
    }


def check_registration_config(config: Sequence[str]) -> None:
    """``deploy --config`` may set a schedule's cron, timezone or description; a run's settings are the configs of
    the checkout that runs it (a parameter on the server would be free-form input to every worker)."""
    for override in config:
        key = override.split("=", 1)[0].lstrip("+~")
        parts = key.split(".")
        if len(parts) != 3 or parts[0] != "deployments" or parts[2] not in ("cron", "timezone", "description"):
            raise ConfigError(
                f"deploy --config {ascii(key[:80])[1:-1]}: only deployments.<name>.cron, .timezone or .description "
                "can be set here; a scheduled run takes its settings from configs/pipeline.yaml of the checkout "
                "that runs it (edit deployments.<name>.parameters there)"
            )


def _on_pool(kwargs: dict[str, Any]) -> dict[str, Any]:
    """A scheduled deployment taken by a pool's worker: the platform's engine command (the one a worker runs)."""
    return {**kwargs, "job_variables": {"command": PIPELINE_ENGINE_COMMAND}}


def _run_in_worker_checkout(deployment_ids: Sequence[Any]) -> None:
    """Replace the deploying machine's path by the pull step that enters the worker's own checkout."""
    with get_client(sync_client=True) as client:
        for deployment_id in deployment_ids:
            client.update_deployment(deployment_id, DeploymentUpdate(pull_steps=[{PULL_STEP: {}}]))


def deploy_to_pool(
    work_pool: str, root: Path, config: Sequence[str] = (), create_pool: bool = True, cell_pool: str | None = None
) -> list[str]:
    """Register the scheduled pipeline deployments on ``work_pool`` and the cell deployment of each pool that runs
    cells (``work_pool``, and ``cell_pool`` whose workers then take the scheduled runs' cells); returns ids."""

    check_registration_config(config)
    pools = list(dict.fromkeys([work_pool, *([cell_pool] if cell_pool else [])]))
    if create_pool:
        for pool in pools:
            _ensure_process_pool(pool)
    source = pipeline.from_source(source=str(root.resolve()), entrypoint=ENTRYPOINT)
    cell_source = cell.from_source(source=str(root.resolve()), entrypoint=CELL_ENTRYPOINT)
    deployments = [
        source.to_deployment(**_on_pool(_deployment_kwargs(name, spec, cell_pool)), work_pool_name=work_pool)
        for name, spec in deployment_specs(config).items()
    ]
    cells = [
        cell_source.to_deployment(name=pool, work_pool_name=pool, tags=["corewarding", "cell"],
                                  job_variables={"command": CELL_ENGINE_COMMAND},
                                  description=f"one matrix cell (train, evaluate, publish) on work pool {pool}")
        for pool in pools
    ]  # fmt: skip
    by_pool: dict[str, list[Any]] = {}
    for deployment in [*deployments, *cells]:
        by_pool.setdefault(str(deployment.work_pool_name), []).append(deployment)
    ids = [
        deploy(
            *group, work_pool_name=pool, build=False, push=False, print_next_steps_message=False, ignore_warnings=True
        )
        for pool, group in by_pool.items()
    ]
    flat = [i for group in ids for i in group]
    _run_in_worker_checkout(flat)
    return [str(i) for i in flat]


def serve(config: Sequence[str] = ()) -> None:
    """Register the configured deployments and run their flow runs in this process's children until stopped."""
    check_registration_config(config)
    prefect_serve(
        *(pipeline.to_deployment(**_deployment_kwargs(name, spec)) for name, spec in deployment_specs(config).items())
    )
