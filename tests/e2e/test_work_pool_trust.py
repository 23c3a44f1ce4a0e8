"""The work pool's trust boundary, tried the way it was found: a real Prefect server with authentication, the
platform's deployments, real workers in their own checkouts, and hostile flow runs made through the Prefect API by
whoever holds its auth string but not the pool's key: a changed command or environment, unsigned and badly signed
jobs, a made-up code version, a data path into the worker's venv, escaped interpolations that would read its
environment, another store, a scheduled run with free-form parameters, a deployment whose pull step runs a script.
Each is refused with one line and nothing runs (a marker file), nothing leaks (a canary environment variable is in no
flow run state, worker log or server database) and the worker goes on; a worker whose checkout runs other code
leaves a signed cell to another worker without stopping or spending an attempt."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from corewarding.pipeline.versions import code_version
from tests.support.prefect_server import kill_tree, prefect_server
from tests.support.repo import clone_project, dvc_bin

BIN = Path(sys.executable).parent
CELL = "gt_grpo__tiny__tiny"
AUTH = "corewarding:pool-secret"
CANARY = "hf_canary_Zq81xT"  # stands for a token in the worker's environment

# Made through the API by whoever reaches it: flow runs of the cell deployment, each as the script's JSON says;
# waits until every one has ended and prints {name: [state, message]}.
SUBMIT = """
import json, sys, time
from prefect import get_client
from prefect.client.schemas.actions import DeploymentUpdate
from prefect.deployments import run_deployment
from corewarding.pipeline.pool_key import load_keys, sign
cases, pull_script = json.loads(sys.argv[1]), sys.argv[2]
with get_client(sync_client=True) as client:
    if pull_script:
        deployment = client.read_deployment_by_name("corewarding-cell/cpu-pool")
        steps = [{"prefect.deployments.steps.run_shell_script": {"script": pull_script}}]
        client.update_deployment(deployment.id, DeploymentUpdate(pull_steps=steps))
    ids = {}
    for name, kw in cases.items():
        job = kw.get("parameters", {}).get("job")
        if kw.pop("sign", False):  # as a parent holding the pool's key would: the allow-list must still refuse it
            job["signature"] = sign({**job, "cell_id": kw["parameters"]["cell_id"]}, load_keys()[0])
        deployment = kw.pop("deployment", "corewarding-cell/cpu-pool")
        ids[name] = run_deployment(deployment, timeout=0, **kw).id
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
        env={**env, "COREWARDING_ROOT": str(checkout), "COREWARDING_WORKER": name, "COREWARDING_TEST_CANARY": CANARY},
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


def _wait_for(log: Path, words: str, proc: subprocess.Popen[bytes], timeout: float) -> str:
    """The log's text once it contains ``words`` (a failure naming the log if the process ends or time runs out)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = log.read_text()
        if words in text:
            return text
        if proc.poll() is not None:
            pytest.fail(f"the worker ended ({proc.returncode}): {text[-3000:]}")
        time.sleep(0.5)
    pytest.fail(f"{words!r} not in {log} after {timeout:.0f} s: {log.read_text()[-3000:]}")


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
    checkout = clone_project(tmp_path / "w1")
    # the store's data/ holds a .pth that would run at the next Python start, with its hash, as the parent shares data
    pth = ".venv/lib/python3.11/site-packages/zz.pth"
    payload = f"import pathlib; pathlib.Path({str(pwned / 'pth')!r}).touch()\n".encode()
    (store / "data" / Path(pth).parent).mkdir(parents=True)
    (store / "data" / pth).write_bytes(payload)
    (store / "data" / f"{pth}.sha256").write_text(hashlib.sha256(payload).hexdigest())
    worker = _worker("w1", checkout, store, env, tmp_path / "w1.log")
    code = code_version(checkout)  # read from an earlier run's parameters, as any API client can
    job = {"matrix": "demo", "store_url": str(store), "config_hash": "0123456789abcdef", "code_version": code}
    cell = {"cell_id": CELL, "job": job}
    escaped = r"$\{oc.env:COREWARDING_TEST_CANARY\}"  # no "${": Hydra would unescape it and resolve it

    def signed(**change: object) -> dict[str, object]:
        return {"parameters": {"cell_id": CELL, "job": {**job, **change}}, "sign": True}

    cases = {
        "command": {"parameters": cell, "job_variables": {"command": f"touch {pwned}/command"}},
        "env": {"parameters": cell, "job_variables": {"env": {"PYTHONSTARTUP": str(pwned / "x.py")}}},
        "working_dir": {"parameters": cell, "job_variables": {"working_dir": str(pwned)}},
        "unsigned": {"parameters": cell},
        "made-up code": {"parameters": {"cell_id": CELL, "job": {**job, "code_version": "deadbeef0000/py-00000000"}}},
        "bad signature": {"parameters": {"cell_id": CELL, "job": {**job, "signature": "0" * 64}}},
        "pth": signed(overrides=[f"dataset.val_files={pth}"]),
        "escaped env": signed(overrides=[f"+x={escaped}"]),
        "escaped seed": signed(overrides=[f"seed={escaped}"]),
        "escaped eval": signed(eval_overrides=[r"generation=$\{now:%s\}"]),
        "attacker store": signed(store_url=str(attacker)),
        "unknown key": signed(command="touch x"),
        "scheduled free-form": {"deployment": "corewarding-pipeline/nightly",
                                "parameters": {"matrix": "demo", "overrides": [f"+x={escaped}"]}},
    }  # fmt: skip
    try:
        ended = _submit(env, parent, cases)
        reasons = {
            "command": "is not one of the platform's engine commands",
            "env": "job variables env are not accepted",
            "working_dir": "job variables working_dir are not accepted",
            "unsigned": "the job is not signed with the pool's key",
            "made-up code": "the job is not signed with the pool's key",  # refused: it stops no worker
            "bad signature": "signature does not verify",
            "pth": "override 1 (dataset.val_files): a work pool's job may set only",
            "escaped env": "override 1 (+x): a work pool's job may set only",
            "escaped seed": "override 1 (seed): must be a whole number",
            "escaped eval": "evaluation override 1 (generation): must be one of transformers, vllm",
            "attacker store": "names a store other than this worker's",
            "unknown key": "its fields are not a cell job's",
            "scheduled free-form": "pipeline run parameters matrix, overrides: a scheduled run carries only",
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
    assert not (checkout / ".venv").exists()  # the .pth never left the store
    log = (tmp_path / "w1.log").read_text()
    assert log.count("refused by worker w1") == len(cases) + 1
    # the canary is in no state the API serves, no worker log, no byte of the server's database
    assert CANARY not in json.dumps(ended) and CANARY not in log
    server_files = [p for p in (tmp_path / "server-home").rglob("*") if p.is_file()]
    assert any(p.name.startswith("prefect.db") for p in server_files)
    assert not [p for p in server_files if CANARY.encode() in p.read_bytes()]


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
        said = _wait_for(tmp_path / "stale.log", "leaves cell run", first, timeout=240)
        assert f"worker stale leaves cell run {CELL} to the other workers: {CELL}: the parent runs code" in said, said
        good = _worker("good", clone_project(tmp_path / "good"), store, env, tmp_path / "good.log")
        out, err = run.communicate(timeout=400)
        assert first.poll() is None  # it left the cell and went on serving the pool
    finally:
        for proc in (first, good, run):
            if proc is not None:
                kill_tree(proc.pid)
    assert run.returncode == 0, out[-3000:] + err[-5000:]
    report = json.loads(out)  # --json: stdout is the report alone
    (cell,) = report["cells"]
    assert cell["attempt"] == CELL and cell["worker"] == "good", cell  # its first attempt, on the other worker
    assert cell["steps"]["train"] == "done", cell
    # the run rewrote no tracked file of the parent's checkout (its DVC record is params.yaml and dvc.lock, untracked)
    shown = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=parent, capture_output=True,
                           text=True, check=True)  # fmt: skip
    assert shown.stdout == "", shown.stdout
