"""The cell worker asks the server for runs only when it has room, and once every BUSY_POLL_S while it is full
(a real private Prefect server; the worker's queries are counted on their way to it)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest
from prefect.client.orchestration import SyncPrefectClient, get_client
from prefect.exceptions import PrefectHTTPStatusError

from corewarding.runtime.cell_worker import CellWorker
from corewarding.runtime.prefect_session import prefect_api

BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with prefect_api(tmp_path_factory.mktemp("checkout")) as url:
        yield url


async def _queries_made(worker: CellWorker, polls: int) -> int:
    """How many of ``polls`` rounds of the worker's poll loop reached the server."""
    made = 0
    real = worker.client.get_scheduled_flow_runs_for_work_pool

    async def counted(**kwargs: Any) -> Any:
        nonlocal made
        made += 1
        return await real(**kwargs)

    worker.client.get_scheduled_flow_runs_for_work_pool = counted  # type: ignore[method-assign]
    try:
        for _ in range(polls):
            await worker.get_and_submit_flow_runs()
    finally:
        worker.client.get_scheduled_flow_runs_for_work_pool = real  # type: ignore[method-assign]
    return made


def test_a_full_worker_skips_queries_until_its_busy_interval_and_a_free_one_asks_every_time(api: str) -> None:
    async def scenario() -> dict[str, int]:
        async with CellWorker(work_pool_name="cell-worker-pool", limit=1) as worker:
            counts = {"free": await _queries_made(worker, 3)}
            cell = uuid4()
            worker.limiter.acquire_on_behalf_of_nowait(cell)  # a cell run holds the worker's one slot
            assert worker.is_full()
            counts["full"] = await _queries_made(worker, 5)
            worker.busy_poll_s = 0.0  # the busy interval has passed at every turn: each turn queries
            counts["full, interval passed"] = await _queries_made(worker, 2)
            worker.busy_poll_s = 15.0  # and a query made while full starts the interval again
            counts["full, just asked"] = await _queries_made(worker, 3)
            worker.limiter.release_on_behalf_of(cell)  # the cell ended
            counts["free again"] = await _queries_made(worker, 2)
            counts["skipped"] = worker.skipped_queries
        return counts

    counts = asyncio.run(scenario())
    assert counts == {
        "free": 3, "full": 0, "full, interval passed": 2, "full, just asked": 0, "free again": 2, "skipped": 8
    }  # fmt: skip


def test_a_worker_without_a_limit_is_never_full(api: str) -> None:
    async def scenario() -> tuple[bool, int]:
        async with CellWorker(work_pool_name="cell-worker-pool-2") as worker:
            return worker.is_full(), await _queries_made(worker, 2)

    assert asyncio.run(scenario()) == (False, 2)


def _workers(client: SyncPrefectClient, pool: str) -> list[str]:
    """The names of the pool's workers; none while the pool does not exist (a worker's first heartbeat makes it)."""
    try:
        return [w.name for w in client.read_workers_for_work_pool(pool)]
    except PrefectHTTPStatusError as error:
        if error.response.status_code == 404:
            return []
        raise


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_corewarding_worker_takes_the_pool_and_stops_on_ctrl_c(api: str, sig: signal.Signals) -> None:
    env = {**os.environ, "PREFECT_API_URL": api, "COREWARDING_POOL_KEY": "7d" * 32}  # a worker needs the pool's key
    pool = f"stop-pool-{sig.name.lower()}"
    command = [str(BIN / "corewarding"), "worker", "--pool", pool, "--limit", "1", "--name", "w1", "--create-pool"]
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 90
        with get_client(sync_client=True) as client:
            while time.monotonic() < deadline and proc.poll() is None and _workers(client, pool) != ["w1"]:
                time.sleep(0.5)
            assert _workers(client, pool) == ["w1"], f"the worker did not register: {proc.poll()}"
            pool_type = client.read_work_pool(pool).type
        sent = time.monotonic()
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=120)
        took = time.monotonic() - sent
        code = proc.returncode
    finally:
        if proc.poll() is None:
            proc.kill()
    assert pool_type == "process"  # the pool Prefect's own process worker uses, and `corewarding deploy` creates
    assert took < 60 and code == 130, (took, code, out[-2000:])  # seconds when idle; generous on a busy machine
    assert f"Received {sig.name}" in out and "start it again" in out, out[-2000:]  # a clean stop, then the hint
    assert "Traceback" not in out, out[-3000:]
