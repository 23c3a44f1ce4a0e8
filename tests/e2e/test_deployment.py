"""Scheduled deployments against a real Prefect server: `prefect server start` on 127.0.0.1, `corewarding deploy` to a
process work pool, a triggered run of the tiny CPU configuration picked up by `prefect worker start`, its results in
DuckDB."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from tests.support.net import free_port, wait_healthy
from tests.support.repo import clone_project, dvc_bin

BIN = Path(sys.executable).parent
CELL = "self_certainty__tiny__tiny"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A real Prefect server on 127.0.0.1 with its own home; yields the environment that points at it."""
    home = tmp_path_factory.mktemp("prefect-server")
    port = free_port()
    env = {
        **os.environ,
        "PREFECT_HOME": str(home),
        "PREFECT_API_URL": f"http://127.0.0.1:{port}/api",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_RESULTS_LOCAL_STORAGE_PATH": str(home / "results"),
        "HF_HUB_OFFLINE": "1",
    }
    log = (home / "server.log").open("w")
    proc = subprocess.Popen(
        [str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    try:
        wait_healthy(f"http://127.0.0.1:{port}/api/health", proc, (home / "server.log").read_text)
        yield env
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
        log.close()


def _run(args: list[str], env: dict[str, str], cwd: Path, timeout: float = 300) -> str:
    done = subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout + done.stderr


@pytest.mark.slow
def test_deploy_trigger_and_a_worker_runs_the_tiny_pipeline_into_duckdb(server: dict[str, str], tmp_path: Path) -> None:
    if not dvc_bin().exists():
        pytest.skip("dvc is not installed in this environment")
    clone = clone_project(tmp_path)
    out = _run([str(BIN / "corewarding"), "deploy", "--work-pool", "cpu-pool", "--root", str(clone)], server, clone)
    assert "prefect worker start --pool cpu-pool" in out

    trigger = f"""
import json
from prefect import get_client
from prefect.deployments import run_deployment
with get_client(sync_client=True) as client:
    deployments = {{d.name: d for d in client.read_deployments()}}
    limit = client.read_global_concurrency_limit_by_name("tag:gpu")
run = run_deployment("corewarding-pipeline/nightly", timeout=0,
                     parameters={{"matrix": "demo", "cells": ["{CELL}"], "push": False}})
print(json.dumps({{"run": str(run.id), "limit": limit.limit,
  "schedules": {{n: [s.schedule.cron for s in d.schedules] for n, d in deployments.items()}},
  "pools": sorted({{d.work_pool_name for d in deployments.values()}})}}))
"""
    info = json.loads(_run([sys.executable, "-c", trigger], server, clone).strip().splitlines()[-1])
    assert info["schedules"] == {"nightly": ["0 2 * * *"], "weekly-eval": ["0 6 * * 0"]}
    assert info["pools"] == ["cpu-pool"] and info["limit"] == 1

    worker = _run([str(BIN / "prefect"), "worker", "start", "--pool", "cpu-pool", "--run-once"], server, tmp_path)
    assert "Finished in state Completed()" in worker, worker[-3000:]

    check = f"""
from prefect import get_client
with get_client(sync_client=True) as client:
    print(client.read_flow_run("{info["run"]}").state.type.value)
"""
    assert _run([sys.executable, "-c", check], server, clone).strip().splitlines()[-1] == "COMPLETED"
    with duckdb.connect(str(clone / "results/results.duckdb"), read_only=True) as con:
        runs = con.execute("SELECT cell_id, status FROM runs").fetchall()
        evaluated = con.execute("SELECT count(DISTINCT step) FROM eval_metrics").fetchone()
    assert runs == [(CELL, "finished")] and evaluated == (3,)
    assert (clone / "runs" / CELL / "publish/global_step_12/README.md").is_file()
