"""``corewarding worker``: Prefect's process worker for a cell pool, that stops asking for runs while it is full.

Prefect's worker asks the server for scheduled runs every ``PREFECT_WORKER_QUERY_SECONDS`` whether or not it has
room; a worker at its ``--limit`` cannot take what it is offered. A cell holds its GPU machine for hours, and each
of those queries costs a self-hosted server about 50 ms of CPU (measured on a 2-core machine: two workers asking
every second took 0.1 core of the server's CPU, idle or busy). This worker skips the query while every slot is
taken, and still asks at the first poll-loop turn ``BUSY_POLL_S`` seconds after its last query (within 15 s plus
one query interval), so that the pool's work queue stays "ready" (Prefect marks a queue not ready after 60 s
without a query). Once a cell ends, the next query comes within ``PREFECT_WORKER_QUERY_SECONDS``, as with Prefect's
worker. Everything else is Prefect's process worker: the same pool type, job template, logs, cancellation and
Ctrl-C handling as ``prefect worker start`` (the first Ctrl-C or SIGTERM stops it and sends its cells SIGINT, the
next one kills them).

Before it takes a run, it vets it (the pool's trust boundary, docs/work-pool.md): only the platform's engine commands,
no job variables but the command (no environment, no working directory), a deployment of the platform's flows; for
a cell, a job signed with the pool's key whose fields ``job_checks.check_job`` accepts; for a scheduled pipeline
run, nothing but the name of one of its own checkout's schedules. A refused run is marked Failed with one line, and
nothing starts; the worker goes on. A signed cell whose parent runs other code (another code version, installed
packages included) is left scheduled for the other workers, with one warning, and the worker goes on too.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
import warnings
from contextlib import suppress
from pathlib import Path
from typing import Any

from prefect.client.schemas.objects import FlowRun
from prefect.client.schemas.responses import WorkerFlowRunResponse
from prefect.exceptions import Abort, ObjectNotFound
from prefect.settings import PREFECT_WORKER_HEARTBEAT_SECONDS
from prefect.states import Failed
from prefect.utilities.engine import propose_state
from prefect.utilities.processutils import setup_signal_handlers_worker
from prefect.workers.process import ProcessJobConfiguration, ProcessWorker

from corewarding.pipeline.job_checks import (
    JobRefused,
    check_job,
    check_scheduled,
    signed_job,
    worker_keys,
    worker_store,
)
from corewarding.pipeline.settings import deployment_specs
from corewarding.pipeline.versions import code_version
from corewarding.runtime.worker import ENGINE_COMMANDS, ENTRYPOINTS, PULL_STEP

log = logging.getLogger(__name__)

BUSY_POLL_S = 15.0  # a full worker's query interval: under the 60 s after which Prefect marks its queue not ready
_CELL_PARAMETERS = {"cell_id", "job", "attempt"}


class OtherCode(RuntimeError):
    """A cell job from a parent whose code version is not this checkout's (one line, naming both)."""


def vet_parameters(
    kind: str, parameters: dict[str, Any], own_store: str | None, own_code: str, keys: list[bytes],
    schedules: tuple[str, ...] = (),
) -> None:  # fmt: skip
    """Raise JobRefused for parameters a parent of this pool would not send (unsigned, badly signed, or a field
    outside the allow-list), OtherCode for a signed cell whose parent runs other code."""
    if kind == "pipeline":
        check_scheduled(parameters, schedules)
        return
    extra = set(parameters) - _CELL_PARAMETERS
    job = parameters.get("job")
    if extra or not isinstance(job, dict):
        raise JobRefused("cell run parameters: only cell_id, job and attempt, with job a mapping")
    attempt = parameters.get("attempt", 1)
    if type(attempt) is not int or not 1 <= attempt <= 100:
        raise JobRefused("cell run parameter attempt: must be a whole number in [1, 100]")
    spec = signed_job({**job, "cell_id": parameters.get("cell_id")}, keys)
    if spec.code_version != own_code:
        raise OtherCode(f"{spec.cell_id}: the parent runs code {spec.code_version}, this checkout {own_code}")
    check_job(spec, own_store)


with warnings.catch_warnings():
    # Prefect registers every worker class by its type; this one keeps the type "process" (same pools, same job
    # template), so it replaces Prefect's class in this process's registry, which Prefect announces with a warning.
    warnings.simplefilter("ignore", UserWarning)

    class CellWorker(ProcessWorker):
        """A process worker that does not ask for runs it has no room for (one query every BUSY_POLL_S instead)."""

        busy_poll_s: float = BUSY_POLL_S

        def __init__(self, *args: Any, checkout: Path | None = None, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._last_query = float("-inf")
            self.skipped_queries = 0
            self.checkout = checkout or Path.cwd()
            self.left_to_others: set[Any] = set()  # flow run ids of signed cells of other code, left scheduled
            self._schedules: tuple[str, ...] | None = None

        def runs_in_progress(self) -> int:
            """How many flow runs this worker is running (0 without a limit: it does not count them)."""
            return int(self._limiter.borrowed_tokens) if self._limiter is not None else 0

        def is_full(self) -> bool:
            """Whether every slot of the worker's ``--limit`` is taken (never, without a limit)."""
            return self._limiter is not None and self._limiter.available_tokens == 0

        async def get_and_submit_flow_runs(self) -> list[FlowRun]:
            if self.is_full() and time.monotonic() - self._last_query < self.busy_poll_s:
                self.skipped_queries += 1
                return []
            self._last_query = time.monotonic()
            return await super().get_and_submit_flow_runs()

        async def _submit_scheduled_flow_runs(self, flow_run_response: list[WorkerFlowRunResponse]) -> list[FlowRun]:
            if self.is_full():  # Prefect's own code takes none of them: nothing to vet
                return await super()._submit_scheduled_flow_runs(flow_run_response)
            accepted: list[WorkerFlowRunResponse] = []
            room = self._limiter.available_tokens if self._limiter is not None else len(flow_run_response)
            for entry in flow_run_response:
                run = entry.flow_run
                if run.id in self._submitting_flow_run_ids:
                    accepted.append(entry)
                    continue
                if len(accepted) >= room:  # Prefect takes no more than its limit: the rest are vetted when taken
                    break
                try:
                    await self.vet(run)
                    accepted.append(entry)
                except JobRefused as refused:
                    await self._refuse(run, str(refused))
                except OtherCode as other:  # left scheduled for the others; said once per run
                    if run.id not in self.left_to_others:
                        self.left_to_others.add(run.id)
                        log.warning("worker %s leaves cell run %s to the other workers: %s; update this checkout (or "
                                    "its environment) to the parent's to take such cells", self.name, run.name,
                                    other)  # fmt: skip
            return await super()._submit_scheduled_flow_runs(accepted)

        async def vet(self, run: FlowRun) -> None:
            """Raise JobRefused unless ``run`` is one of the platform's runs, as the platform made it; OtherCode for
            a cell job of a parent with other code."""
            if run.deployment_id is None:
                raise JobRefused("not a run of a deployment")
            try:
                deployment = await self.client.read_deployment(run.deployment_id)
            except ObjectNotFound as exc:
                raise JobRefused(f"its deployment {run.deployment_id} does not exist") from exc
            variables = {**(deployment.job_variables or {}), **(run.job_variables or {})}
            others = sorted(set(variables) - {"command"})
            if others:
                raise JobRefused(f"job variables {', '.join(others)} are not accepted (the command is the platform's)")
            config: ProcessJobConfiguration = await ProcessJobConfiguration.from_template_and_values(
                self.work_pool.base_job_template, variables, client=self.client
            )
            kind = ENGINE_COMMANDS.get(str(config.command))
            if kind is None:
                raise JobRefused(f"command {config.command!r} is not one of the platform's engine commands")
            if config.env or config.working_dir:
                raise JobRefused("the work pool's job template sets an environment or a working directory")
            if deployment.entrypoint != ENTRYPOINTS[kind] or deployment.pull_steps != [{PULL_STEP: {}}]:
                raise JobRefused(f"deployment {deployment.name}: entrypoint or pull steps are not the platform's")
            own_code = await asyncio.to_thread(code_version, self.checkout)  # git: not on the event loop
            keys = worker_keys()
            if kind == "pipeline" and self._schedules is None:
                self._schedules = tuple(await asyncio.to_thread(deployment_specs))  # its own configs/pipeline.yaml
            vet_parameters(kind, dict(run.parameters or {}), worker_store(), own_code, keys, self._schedules or ())

        async def _refuse(self, run: FlowRun, why: str) -> None:
            message = f"refused by worker {self.name}: {why}"
            log.warning("flow run %s %s", run.name, message)
            with suppress(Abort):  # already ended otherwise
                await propose_state(self.client, Failed(message=message), flow_run_id=run.id)


def start(pool: str, limit: int | None, name: str | None, checkout: Path | None = None) -> int:
    """Run a cell worker of ``pool`` until interrupted; returns the exit status (130 once interrupted)."""
    worker = CellWorker(
        work_pool_name=pool, limit=limit, name=name, checkout=checkout,
        heartbeat_interval_seconds=int(PREFECT_WORKER_HEARTBEAT_SECONDS.value()),
    )  # fmt: skip
    try:
        asyncio.run(_serve(worker))
    except (KeyboardInterrupt, asyncio.CancelledError):
        log.warning("worker %s stopped; start it again to take more cells", worker.name)
        return 130
    return 0


async def _serve(worker: CellWorker) -> None:
    # As Prefect's CLI: the handlers go in inside the event loop, over asyncio's own SIGINT handler, so that the
    # first signal cancels the worker's task (a clean stop) and the handler that kills on a second one is in place.
    setup_signal_handlers_worker(os.getpid(), "the cell worker", log.warning)
    await worker.start(printer=log.info)
