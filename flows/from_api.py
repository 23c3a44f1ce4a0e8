"""What a flow run started through the Prefect API may take: its own process's run is one a worker (or ``deploy
--serve``) started from parameters anybody with the API's auth string could have written (docs/work-pool.md)."""

from __future__ import annotations

import os
from typing import Any

from prefect.runtime import flow_run

from corewarding.pipeline.job_checks import check_scheduled, worker_store
from corewarding.pipeline.settings import PipelineSettings, deployment_specs, load_settings


def started_from_api() -> bool:
    """Whether this flow run is the process's own, started from a flow run made through the Prefect API (not a
    flow called in this process, e.g. a cell of a pipeline run here, whose parameters this process made)."""
    return os.environ.get("PREFECT__FLOW_RUN_ID") == str(flow_run.get_id())


def scheduled_settings(parameters: dict[str, Any]) -> PipelineSettings:
    """A scheduled pipeline run's settings, built from this checkout's ``configs/pipeline.yaml``: the run names only
    its schedule (and the cell pool); nothing else it carries is read (JobRefused names what it carried)."""
    specs = deployment_specs()
    name = check_scheduled(parameters, specs)
    chosen = dict(specs[name].get("parameters") or {})  # type: ignore[call-overload]
    if parameters.get("work_pool"):
        chosen["work_pool"] = parameters["work_pool"]
    store = worker_store()
    if chosen.get("work_pool") and store:  # the worker's own store (corewarding worker --store)
        chosen["config"] = [*chosen.get("config", []), f"store.url={store}"]
    return load_settings(**chosen)
