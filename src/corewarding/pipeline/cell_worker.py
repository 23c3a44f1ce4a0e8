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
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
import warnings
from typing import Any

from prefect.client.schemas.objects import FlowRun
from prefect.settings import PREFECT_WORKER_HEARTBEAT_SECONDS
from prefect.utilities.processutils import setup_signal_handlers_worker
from prefect.workers.process import ProcessWorker

log = logging.getLogger(__name__)

BUSY_POLL_S = 15.0  # a full worker's query interval: under the 60 s after which Prefect marks its queue not ready

with warnings.catch_warnings():
    # Prefect registers every worker class by its type; this one keeps the type "process" (same pools, same job
    # template), so it replaces Prefect's class in this process's registry, which Prefect announces with a warning.
    warnings.simplefilter("ignore", UserWarning)

    class CellWorker(ProcessWorker):
        """A process worker that does not ask for runs it has no room for (one query every BUSY_POLL_S instead)."""

        busy_poll_s: float = BUSY_POLL_S

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._last_query = float("-inf")
            self.skipped_queries = 0

        def is_full(self) -> bool:
            """Whether every slot of the worker's ``--limit`` is taken (never, without a limit)."""
            return self._limiter is not None and self._limiter.available_tokens == 0

        async def get_and_submit_flow_runs(self) -> list[FlowRun]:
            if self.is_full() and time.monotonic() - self._last_query < self.busy_poll_s:
                self.skipped_queries += 1
                return []
            self._last_query = time.monotonic()
            return await super().get_and_submit_flow_runs()


def start(pool: str, limit: int | None, name: str | None) -> int:
    """Run a cell worker of ``pool`` until interrupted; returns the exit status, 130 once interrupted."""
    worker = CellWorker(
        work_pool_name=pool, limit=limit, name=name,
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
