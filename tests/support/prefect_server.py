"""A real Prefect server on 127.0.0.1 for a test, with its own home; process trees killed like a dead machine."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import psutil
import pytest

from corewarding.pipeline.pool_key import KEY_FILE_VARIABLE
from tests.support.net import free_port, wait_healthy

BIN = Path(sys.executable).parent


@contextmanager
def prefect_server(home: Path, database_url: str | None = None, auth: str | None = None) -> Iterator[dict[str, str]]:
    """``prefect server start`` with its own home, its database in that home (SQLite, Prefect's default) or at
    ``database_url`` (PostgreSQL: tests/support/postgres.py), and with ``auth`` ("user:password") every API request
    must carry those credentials (as a work pool's server must: docs/work-pool.md); yields the environment that
    points at it (with the credentials and the pool's signing key, as a client's)."""
    port = free_port()
    env = {
        **os.environ,
        "PREFECT_HOME": str(home),
        "PREFECT_API_URL": f"http://127.0.0.1:{port}/api",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_RESULTS_LOCAL_STORAGE_PATH": str(home / "results"),
        "HF_HUB_OFFLINE": "1",
        "PREFECT_WORKER_QUERY_SECONDS": "1",  # a worker started here sees a new run within a second (default 10 s)
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",  # the project's environment active, as for a worker
    }
    if database_url:
        env["PREFECT_SERVER_DATABASE_CONNECTION_URL"] = database_url
    server_env = {**env, "PREFECT_SERVER_API_AUTH_STRING": auth} if auth else env
    if auth:
        env["PREFECT_API_AUTH_STRING"] = auth
    # the pool's signing key, made as the README says and given to the clients only (submitters and workers): the
    # server never holds it
    key_file = home / "pool.key"
    if not key_file.exists():
        subprocess.run([str(BIN / "corewarding"), "pool-key", "create", str(key_file)], check=True, capture_output=True,
                       timeout=60)  # fmt: skip
    env[KEY_FILE_VARIABLE] = str(key_file)
    log = (home / "server.log").open("w")
    proc = subprocess.Popen(
        [str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
        env=server_env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    try:
        wait_healthy(f"http://127.0.0.1:{port}/api/health", proc, (home / "server.log").read_text)
        yield env
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
        log.close()


def kill_tree(pid: int, sig: int = signal.SIGKILL) -> list[int]:
    """Signal a process and every descendant (as a machine that dies takes all of them); returns their PIDs."""
    try:
        root = psutil.Process(pid)
    except psutil.NoSuchProcess:
        return []
    procs = [root, *root.children(recursive=True)]
    for proc in procs:
        with suppress(psutil.NoSuchProcess):
            proc.send_signal(sig)
    psutil.wait_procs(procs, timeout=10)
    return [p.pid for p in procs]


@contextmanager
def prefect_harness(home: Path) -> Iterator[None]:
    """Prefect's in-process test server with its home (settings, blocks, results) in ``home``: a test never reads or
    writes ~/.prefect. The environment is restored afterwards."""
    from prefect.testing.utilities import prefect_test_harness

    patch = pytest.MonkeyPatch()
    for key, value in {
        "PREFECT_HOME": str(home),
        "PREFECT_RESULTS_LOCAL_STORAGE_PATH": str(home / "results"),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    }.items():
        patch.setenv(key, value)
    try:
        with prefect_test_harness(server_startup_timeout=90):
            yield
    finally:
        patch.undo()
