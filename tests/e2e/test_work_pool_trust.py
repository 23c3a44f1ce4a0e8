"""The work pool's trust boundary, tried the way it was found: a real Prefect server with authentication, the
platform's deployments, real workers in their own checkouts, and hostile flow runs made through the Prefect API
(a changed command, an environment, a hand-made job, an interpolation that reads the worker's environment, another
store, a deployment whose pull step runs a script). Each is refused with one line and nothing runs; a worker whose
checkout runs other code leaves the cell to another worker without spending its attempts."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.prefect_server import kill_tree, prefect_server
from tests.support.repo import clone_project, dvc_bin

BIN = Path(sys.executable).parent
CELL = "gt_grpo__tiny__tiny"
AUTH = "corewarding:pool-secret"

# Made through the API by whoever reaches it: flow runs of the cell deployment, each as the script's JSON says;
# waits until every one has ended and prints {name: [state, message]}.
SUBMIT = """
import json, sys, time
from prefect import get_client
from prefect.client.schemas.actions import DeploymentUpdate
from prefect.deployments import run_deployment
cases, pull_script = json.loads(sys.argv[1]), sys.argv[2]
with get_client(sync_client=True) as client:
    if pull_script:
        deployment = client.read_deployment_by_name("corewarding-cell/cpu-pool")
        steps = [{"prefect.deployments.steps.run_shell_script": {"script": pull_script}}]
        client.update_deployment(deployment.id, DeploymentUpdate(pull_steps=steps))
    ids = {name: run_deployment("corewarding-cell/cpu-pool", timeout=0, **kw).id for name, kw in cases.items()}
    ended, deadline = {}, time.monotonic() + 240
    while len(ended) < len(ids) and time.monotonic() < deadline:
        for name, run_id in ids.items():
            state = client.read_flow_run(run_id).state
            if state is not None and state.is_final():
                ended[name] = [state.type.value, state.message]
        time.sleep(0.5)
print(json.dumps(ended))
"""


def _run(args: list[str], env: dict[str, str], cwd: Path, timeout: float = 300) -> str:
    done = subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def _worker(name: str, checkout: Path, store: Path, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [str(BIN / "corewarding"), "worker", "--pool", "cpu-pool", "--limit", "1", "--name", name,
         "--store", str(store)],
        env={**env, "COREWARDING_ROOT": str(checkout), "COREWARDING_WORKER": name},
        cwd=checkout, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip


@pytest.fixture
def pool(tmp_path: Path) -> Iterator[dict[str, object]]:
    """An authenticated server, the platform's deployments registered from the parent's checkout, a store."""
    if not dvc_bin().exists():
        pytest.skip("dvc is not installed in this environment")
    parent = clone_project(tmp_path / "parent")
    (tmp_path / "store").mkdir()
    (tmp_path / "server-home").mkdir()
    with prefect_server(tmp_path / "server-home", auth=AUTH) as env:
        _run([str(BIN / "corewarding"), "deploy", "--work-pool", "cpu-pool", "--root", str(parent)], env, parent)
        yield {"env": env, "parent": parent, "store": tmp_path / "store"}


def _unpack(pool: dict[str, object]) -> tuple[dict[str, str], Path, Path]:
    env, parent, store = pool["env"], pool["parent"], pool["store"]
    assert isinstance(env, dict) and isinstance(parent, Path) and isinstance(store, Path)
    return env, parent, store


def _submit(env: dict[str, str], cwd: Path, cases: dict[str, object], pull_script: str = "") -> dict[str, list[str]]:
    out = _run([sys.executable, "-c", SUBMIT, json.dumps(cases), pull_script], env, cwd, timeout=300)
    return dict(json.loads(out.strip().splitlines()[-1]))


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_hostile_runs_through_the_api_are_refused_and_nothing_runs(tmp_path: Path, pool: dict[str, object]) -> None:
    env, parent, store = _unpack(pool)
    api = env["PREFECT_API_URL"]
    with pytest.raises(urllib.error.HTTPError) as anonymous:  # without the credentials the API answers nothing
        urllib.request.urlopen(urllib.request.Request(f"{api}/deployments/filter", data=b"{}", method="POST"))
    assert anonymous.value.code == 401

    pwned, attacker = tmp_path / "pwned", tmp_path / "attacker-store"
    pwned.mkdir()
    attacker.mkdir()
    worker = _worker("w1", clone_project(tmp_path / "w1"), store, env, tmp_path / "w1.log")
    job = {"matrix": "demo", "store_url": str(store), "config_hash": "0123456789abcdef", "code_version": "c0ffee"}
    cell = {"cell_id": CELL, "job": job}
    cases = {
        "command": {"parameters": cell, "job_variables": {"command": f"touch {pwned}/command"}},
        "env": {"parameters": cell, "job_variables": {"env": {"PYTHONSTARTUP": str(pwned / "x.py")}}},
        "working_dir": {"parameters": cell, "job_variables": {"working_dir": str(pwned)}},
        "no versions": {"parameters": {"cell_id": CELL, "job": {**job, "config_hash": "", "code_version": ""}}},
        "env leak": {"parameters": {"cell_id": CELL, "job": {**job, "overrides": ["+leak=${oc.env:PREFECT_API_URL}"]}}},
        "attacker store": {"parameters": {"cell_id": CELL, "job": {**job, "store_url": str(attacker)}}},
        "unknown key": {"parameters": {"cell_id": CELL, "job": {**job, "command": "touch x"}}},
    }
    try:
        ended = _submit(env, parent, cases)
        reasons = {
            "command": "is not one of the platform's engine commands",
            "env": "job variables env are not accepted",
            "working_dir": "job variables working_dir are not accepted",
            "no versions": "has no config hash or code version",
            "env leak": "interpolation is not accepted",
            "attacker store": f"names store {attacker}, not this worker's store {store}",
            "unknown key": "unknown key(s) command",
        }
        assert sorted(ended) == sorted(cases), ended
        for name, (state, message) in ended.items():
            assert state == "FAILED" and message.startswith("refused by worker w1: "), (name, message)
            assert reasons[name] in message and "\n" not in message, (name, message)
        # a deployment changed through the API to run a script as its pull step: the worker does not take it
        pulled = _submit(env, parent, {"pull": {"parameters": cell}}, pull_script=f"touch {pwned}/pull")
        assert pulled["pull"][0] == "FAILED" and "pull steps are not the platform's" in pulled["pull"][1], pulled
        assert worker.poll() is None  # it refused them all and still serves the pool
    finally:
        kill_tree(worker.pid)
    assert list(pwned.iterdir()) == [] and list(attacker.iterdir()) == []  # nothing ran, nothing was sent
    assert not (store / "runs").exists()  # and nothing trained
    assert (tmp_path / "w1.log").read_text().count("refused by worker w1") == len(cases) + 1


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_worker_with_other_code_leaves_the_cell_to_another_without_spending_an_attempt(
    tmp_path: Path, pool: dict[str, object]
) -> None:
    env, parent, store = _unpack(pool)
    stale = clone_project(tmp_path / "stale")  # a machine whose checkout has an edit: another code version
    readme = stale / "README.md"
    readme.write_text(readme.read_text() + "\nedited on this machine\n")
    command = [
        str(BIN / "corewarding"), "pipeline", "run", "--matrix", "demo", "--cell", CELL, "--work-pool", "cpu-pool",
        "--json", "--config", f"store.url={store}", "--config", "store.sync_interval_s=0.5",
        "--config", "cells.poll_s=0.5", "schedule.total_steps=4",
    ]  # fmt: skip
    run = subprocess.Popen(command, env=env, cwd=parent, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = _worker("stale", stale, store, env, tmp_path / "stale.log")
    good: subprocess.Popen[bytes] | None = None
    try:
        try:
            status = first.wait(timeout=240)  # it sees the cell, leaves it, and stops
        except subprocess.TimeoutExpired:
            pytest.fail("the stale worker kept running: " + (tmp_path / "stale.log").read_text()[-3000:])
        said = (tmp_path / "stale.log").read_text()
        assert status == 3 and "worker stale stops taking runs" in said and "is left to the other workers" in said
        good = _worker("good", clone_project(tmp_path / "good"), store, env, tmp_path / "good.log")
        out, err = run.communicate(timeout=400)
    finally:
        for proc in (first, good, run):
            if proc is not None:
                kill_tree(proc.pid)
    assert run.returncode == 0, out[-3000:] + err[-5000:]
    report = json.loads(next(line for line in out.splitlines() if line.startswith('{"matrix"')))
    (cell,) = report["cells"]
    assert cell["attempt"] == CELL and cell["worker"] == "good", cell  # its first attempt, on the other worker
    assert cell["steps"]["train"] == "done", cell
    # the run rewrote no tracked file of the parent's checkout (its DVC record is params.yaml and dvc.lock, untracked)
    shown = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=parent, capture_output=True,
                           text=True, check=True)  # fmt: skip
    assert shown.stdout == "", shown.stdout
