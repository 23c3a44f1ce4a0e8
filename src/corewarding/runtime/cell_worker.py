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
no job variables but the command (no environment, no working directory), a deployment of the platform's flows, and
for a cell a job that ``job_checks.check_job`` accepts. A refused run is marked Failed with one line, and nothing
starts. A cell whose parent runs other code (another code version, installed packages included) is left to the
other workers: this worker stops taking runs and says why (exit status 3), so that it does not spend the cell's
attempts.
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

from corewarding.pipeline.job_checks import JobRefused, check_job, check_overrides, worker_store
from corewarding.pipeline.jobs import CellJob
from corewarding.pipeline.versions import code_version
from corewarding.runtime.worker import ENGINE_COMMANDS, ENTRYPOINTS, PULL_STEP

log = logging.getLogger(__name__)

BUSY_POLL_S = 15.0  # a full worker's query interval: under the 60 s after which Prefect marks its queue not ready
STOPPED_FOR_VERSION = 3  # the exit status of a worker that left a cell to others (its checkout is not the parent's)


class OtherCode(RuntimeError):
    """A cell job from a parent whose code version is not this checkout's (one line, naming both)."""


def vet_parameters(kind: str, parameters: dict[str, Any], own_store: str | None, own_code: str) -> None:
    """Raise JobRefused for parameters a parent of this platform would not send, OtherCode for a cell whose parent
    runs other code."""
    if kind == "pipeline":
        for key in ("overrides", "eval_overrides", "config"):
            check_overrides(parameters.get(key) or [], f"pipeline run parameter {key}:")
        return
    try:
        job = CellJob.from_parameters({**dict(parameters.get("job") or {}), "cell_id": parameters.get("cell_id")})
    except (TypeError, ValueError) as exc:
        raise JobRefused(f"cell job: {exc}") from exc
    check_job(job, own_store)
    if job.code_version != own_code:
        raise OtherCode(f"{job.cell_id}: the parent runs code {job.code_version}, this checkout {own_code}")


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
            self.stop_reason: str | None = None
            self.stopping = asyncio.Event()

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
            if self.stop_reason is not None:
                return []
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
                except OtherCode as other:
                    self.stop_reason = (f"worker {self.name} stops taking runs: {other}; cell run {run.name} is left "
                                        "to the other workers. Update this checkout (or its environment) to the "
                                        "parent's and start the worker again")  # fmt: skip
                    self.stopping.set()
                    return []  # none taken: the worker stops
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
            vet_parameters(kind, dict(run.parameters or {}), worker_store(), own_code)

        async def _refuse(self, run: FlowRun, why: str) -> None:
            message = f"refused by worker {self.name}: {why}"
            log.warning("flow run %s %s", run.name, message)
            with suppress(Abort):  # already ended otherwise
                await propose_state(self.client, Failed(message=message), flow_run_id=run.id)


def start(pool: str, limit: int | None, name: str | None, checkout: Path | None = None) -> int:
    """Run a cell worker of ``pool`` until interrupted; returns the exit status: 130 once interrupted, 3 when it
    stopped because a cell's parent runs other code."""
    worker = CellWorker(
        work_pool_name=pool, limit=limit, name=name, checkout=checkout,
        heartbeat_interval_seconds=int(PREFECT_WORKER_HEARTBEAT_SECONDS.value()),
    )  # fmt: skip
    try:
        asyncio.run(_serve(worker))
    except (KeyboardInterrupt, asyncio.CancelledError):
        log.warning("worker %s stopped; start it again to take more cells", worker.name)
        return 130
    if worker.stop_reason:
        log.error("%s", worker.stop_reason)
        return STOPPED_FOR_VERSION
    return 0


async def _serve(worker: CellWorker) -> None:
    # As Prefect's CLI: the handlers go in inside the event loop, over asyncio's own SIGINT handler, so that the
    # first signal cancels the worker's task (a clean stop) and the handler that kills on a second one is in place.
    setup_signal_handlers_worker(os.getpid(), "the cell worker", log.warning)
    serving = asyncio.create_task(worker.start(printer=log.info))
    stopping = asyncio.create_task(worker.stopping.wait())
    await asyncio.wait({serving, stopping}, return_when=asyncio.FIRST_COMPLETED)
    stopping.cancel()
    if serving.done():
        serving.result()  # its error, if it ended with one
        return
    while worker.runs_in_progress() and not serving.done():  # it left a cell to the others: its own cells end first
        await asyncio.sleep(1)
    serving.cancel()
    with suppress(asyncio.CancelledError):
        await serving
