"""Scheduled deployments against a real Prefect server: `prefect server start` on 127.0.0.1, `corewarding deploy` to a
process work pool, a triggered run of the tiny CPU configuration picked up by `prefect worker start`, its results in
DuckDB."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from corewarding.runtime.worker import CELL_ENGINE_COMMAND, PIPELINE_ENGINE_COMMAND, PULL_STEP
from tests.support.prefect_server import prefect_server
from tests.support.repo import clone_project, dvc_bin

BIN = Path(sys.executable).parent
CELL = "self_certainty__tiny__tiny"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A real Prefect server on 127.0.0.1 with its own home; yields the environment that points at it."""
    with prefect_server(tmp_path_factory.mktemp("prefect-server")) as env:
        yield env


def _run(args: list[str], env: dict[str, str], cwd: Path, timeout: float = 300) -> str:
    done = subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout + done.stderr


@pytest.mark.slow
def test_deploy_trigger_and_a_worker_runs_the_tiny_pipeline_into_duckdb(server: dict[str, str], tmp_path: Path) -> None:
    if not dvc_bin().exists():
        pytest.skip("dvc is not installed in this environment")
    clone = clone_project(tmp_path)
    # the machine that runs the schedule reads its settings from its own checkout's configs, not from the server
    pipeline_yaml = clone / "configs" / "pipeline.yaml"
    text = pipeline_yaml.read_text()
    assert "parameters: {matrix: paper, push: true}" in text
    demo = f"parameters: {{matrix: demo, cells: [{CELL}], push: false}}"
    pipeline_yaml.write_text(text.replace("parameters: {matrix: paper, push: true}", demo, 1))
    out = _run([str(BIN / "corewarding"), "deploy", "--work-pool", "cpu-pool", "--root", str(clone)], server, clone)
    assert "corewarding worker --pool cpu-pool --limit 1" in out  # the cell machines; Prefect's worker runs it too

    trigger = """
import json
from prefect import get_client
from prefect.deployments import run_deployment
with get_client(sync_client=True) as client:
    deployments = {d.name: d for d in client.read_deployments()}
run = run_deployment("corewarding-pipeline/nightly", timeout=0)  # what the schedule does: no parameters of its own
print(json.dumps({"run": str(run.id),
  "parameters": {n: d.parameters for n, d in deployments.items()},
  "schedules": {n: [s.schedule.cron for s in d.schedules] for n, d in deployments.items()},
  "pull_steps": {n: d.pull_steps for n, d in deployments.items()},
  "commands": {n: (d.job_variables or {}).get("command") for n, d in deployments.items()},
  "pools": sorted({d.work_pool_name for d in deployments.values()})}))
"""
    info = json.loads(_run([sys.executable, "-c", trigger], server, clone).strip().splitlines()[-1])
    # The two schedules, and the cell deployment (named after its pool) that the pool's workers run cells from.
    assert info["schedules"] == {"nightly": ["0 2 * * *"], "weekly-eval": ["0 6 * * 0"], "cpu-pool": []}
    assert info["pools"] == ["cpu-pool"]
    # a scheduled run carries its schedule's name and nothing a worker would take as settings
    assert info["parameters"] == {"nightly": {"schedule": "nightly"}, "weekly-eval": {"schedule": "weekly-eval"},
                                  "cpu-pool": {}}  # fmt: skip
    # Every deployment runs in the worker's own checkout, not at the deploying machine's path.
    assert set(map(json.dumps, info["pull_steps"].values())) == {json.dumps([{PULL_STEP: {}}])}
    # Every run starts Prefect's engine once, through our wrapper that loads the platform's flow from the checkout.
    assert info["commands"] == {
        "nightly": PIPELINE_ENGINE_COMMAND,
        "weekly-eval": PIPELINE_ENGINE_COMMAND,
        "cpu-pool": CELL_ENGINE_COMMAND,
    }

    worker_env = {**server, "COREWARDING_ROOT": str(clone)}  # the worker machine's checkout
    worker = _run([str(BIN / "prefect"), "worker", "start", "--pool", "cpu-pool", "--run-once"], worker_env, tmp_path)
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
