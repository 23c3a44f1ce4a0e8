"""The matrix across machines: a real Prefect server, two process workers started from two separate checkouts (two
"machines"), a local DVC remote as the shared store, and the demo matrix run from a third checkout. Each worker runs
some cells; the parent ingests all seven. One worker is killed (SIGKILL, with its flow run) mid-training: its cell is
started again on the other worker, resumes from the checkpoint in the store, and ends with the same per-step
metrics as an uninterrupted run."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path

import duckdb
import psutil
import pytest

from tests.support.prefect_server import kill_tree, prefect_server
from tests.support.repo import clone_project, dvc_bin, run_dvc

BIN = Path(sys.executable).parent
SHORT = "schedule.total_steps=8"  # checkpoints at steps 4 and 8: one to resume from, one after it
CELLS = [f"{m}__tiny__tiny" for m in ("gt_grpo", "majority_voting", "self_certainty", "entropy", "co_rewarding_1",
                                      "co_rewarding_2", "co_rewarding_3")] + ["gt_grpo__tiny__tiny__seed1"]  # fmt: skip


def _run(args: list[str], env: dict[str, str], cwd: Path, timeout: float = 300) -> str:
    done = subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


@pytest.fixture
def machines(tmp_path: Path) -> Iterator[dict[str, object]]:
    """A server, the parent's checkout (with the DVC remote) and two worker checkouts, each with its worker."""
    if not dvc_bin().exists():
        pytest.skip("dvc is not installed in this environment")
    parent = clone_project(tmp_path / "parent")
    run_dvc(parent, "remote", "add", "--local", "shared", str(tmp_path / "remote"))  # the checkout stays clean
    (tmp_path / "remote").mkdir()  # a store that does not exist is an error, never created
    (tmp_path / "server-home").mkdir()
    with prefect_server(tmp_path / "server-home", auth="corewarding:pool-secret") as env:  # as docs/work-pool.md asks
        _run([str(BIN / "corewarding"), "deploy", "--work-pool", "cpu-pool", "--root", str(parent)], env, parent)
        workers: dict[str, subprocess.Popen[bytes]] = {}
        try:
            for name in ("w1", "w2"):
                checkout = clone_project(tmp_path / name)
                log = (tmp_path / f"{name}.log").open("w")
                workers[name] = subprocess.Popen(
                    [str(BIN / "corewarding"), "worker", "--pool", "cpu-pool", "--limit", "1", "--name", name,
                     "--store", str(tmp_path / "remote" / "corewarding")],  # the parent's: the DVC remote's store
                    env={**env, "COREWARDING_ROOT": str(checkout), "COREWARDING_WORKER": name},
                    cwd=checkout, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                )  # fmt: skip
            yield {"env": env, "parent": parent, "workers": workers, "store": tmp_path / "remote" / "corewarding"}
        finally:
            for proc in workers.values():
                kill_tree(proc.pid)


def _lease(store: Path, cell_id: str) -> dict[str, object]:
    try:
        return dict(json.loads((store / "leases" / f"{cell_id}.json").read_text()))
    except (OSError, ValueError):
        return {}


def _victim(store: Path, worker: str) -> str | None:
    """A cell that ``worker`` is training, with a checkpoint already in the store but not its last one, once the
    worker has finished another cell (so both workers have done some of the matrix)."""
    reports = [json.loads(p.read_text()) for p in (store / "reports").glob("*.json")]
    if not any(r.get("worker") == worker for r in reports):
        return None
    for cell_id in CELLS:
        run = store / "runs" / cell_id
        latest = run / "checkpoints" / "latest"
        if _lease(store, cell_id).get("worker") == worker and latest.is_file() and not (run / "eval").exists():
            step = int(latest.read_text().strip().rsplit("_", 1)[1])
            if step == 4:
                return cell_id
    return None


def _finished_in_store(store: Path, cell_id: str) -> bool:
    try:
        record = json.loads((store / "runs" / cell_id / "run.json").read_text())
    except (OSError, ValueError):
        return False
    return bool(record.get("status") == "finished")


def _freeze_on_victim(store: Path, worker_pid: int) -> str | None:
    """A victim of worker w1, with w1's whole process tree stopped (SIGSTOP) so nothing moves before the kill.

    The store is read again once w1 is stopped: a final push already under way may have copied the finished run
    record while the ``latest`` pointer (pushed last) still named step 4. Such a cell is no victim; w1 goes on.
    """
    if _victim(store, "w1") is None:
        return None
    root = psutil.Process(worker_pid)
    frozen = [root, *root.children(recursive=True)]
    for proc in frozen:
        with suppress(psutil.NoSuchProcess):
            proc.suspend()
    victim = _victim(store, "w1")
    if victim is not None and not _finished_in_store(store, victim):
        return victim
    for proc in frozen:
        with suppress(psutil.NoSuchProcess):
            proc.resume()
    return None


def _unpack(
    machines: dict[str, object],
) -> tuple[dict[str, str], Path, Path, dict[str, subprocess.Popen[bytes]]]:
    """The machines fixture's environment, parent checkout, shared store and workers, typed."""
    env, parent, store = machines["env"], machines["parent"], machines["store"]
    workers: dict[str, subprocess.Popen[bytes]] = machines["workers"]  # type: ignore[assignment]
    assert isinstance(env, dict) and isinstance(parent, Path) and isinstance(store, Path)
    return env, parent, store, workers


def _metrics(run: Path) -> list[dict[str, object]]:
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in row.items() if k != "step_seconds"} for row in rows]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_two_workers_share_the_matrix_and_a_killed_workers_cell_resumes_on_the_other(
    machines: dict[str, object],
) -> None:
    env, parent, store, workers = _unpack(machines)
    command = [
        str(BIN / "corewarding"), "pipeline", "run", "--matrix", "demo", "--work-pool", "cpu-pool", "--json",
        "--config", "store.dvc_remote=shared", "--config", "store.sync_interval_s=0.5",
        "--config", "cells.lease_timeout_s=12", "--config", "cells.poll_s=0.5", SHORT,
    ]  # fmt: skip
    started = time.monotonic()
    run = subprocess.Popen(command, env=env, cwd=parent, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    victim = None
    while victim is None and run.poll() is None and time.monotonic() - started < 400:
        victim = _freeze_on_victim(store, workers["w1"].pid)
        time.sleep(0.2)
    assert victim is not None, "worker w1 never trained a cell past its first checkpoint: " + "".join(
        part[-3000:] for part in run.communicate(timeout=600)
    )
    kill_tree(workers["w1"].pid)  # the machine dies: worker and its flow run

    out, err = run.communicate(timeout=600)
    assert run.returncode == 0, out[-3000:] + err[-5000:]
    report = json.loads(out)  # --json: stdout is the report alone
    by_cell = {c["cell_id"]: c for c in report["cells"]}
    assert sorted(by_cell) == sorted(CELLS)
    for cell in by_cell.values():
        assert cell["steps"] == {"train": "done", "evaluate": "done", "publish": "done", "ingest": "done"}, cell
    ran_on = {c: by_cell[c]["worker"] for c in CELLS}
    assert ran_on[victim] == "w2"  # started again on the worker still alive
    assert "w1" in ran_on.values()  # w1 finished some cells before it died
    table = "".join(f"{c}\t{w}{'  (first on w1, killed there)' if c == victim else ''}\n" for c, w in ran_on.items())
    (parent / "worker_table.txt").write_text(table)
    print("which worker ran which cell:\n" + table, file=sys.stderr)

    # The parent is the one writer of the DuckDB store: every cell once, evaluated at every saved step.
    with duckdb.connect(str(parent / "results/results.duckdb"), read_only=True) as con:
        runs = con.execute("SELECT cell_id, status FROM runs ORDER BY cell_id").fetchall()
        steps = con.execute(
            "SELECT count(DISTINCT step) FROM eval_metrics JOIN runs USING (run_id) WHERE cell_id = ?", [victim]
        ).fetchone()
    assert runs == [(c, "finished") for c in sorted(CELLS)]
    assert steps == (2,)  # steps 4 and 8

    # The resumed cell's per-step metrics are those of an uninterrupted run of it.
    reference = parent / "reference"
    _run([str(BIN / "corewarding"), "cell", "train", victim, "--matrix", "demo",
          f"paths.runs_dir={reference}", SHORT], env, parent)  # fmt: skip
    assert _metrics(store / "runs" / victim) == _metrics(reference / victim)
    assert _metrics(parent / "runs" / victim) == _metrics(reference / victim)
    shutil.rmtree(reference)


def _cell_processes(workers: dict[str, subprocess.Popen[bytes]]) -> list[psutil.Process]:
    """The cell-run processes (Prefect's engine) that the workers started, not the workers themselves."""
    found = []
    for proc in workers.values():
        for child in psutil.Process(proc.pid).children(recursive=True):
            try:
                if "corewarding.runtime.cell_engine" in " ".join(child.cmdline()):
                    found.append(child)
            except psutil.NoSuchProcess:
                continue
    return found


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_killed_cell_process_is_started_again_as_attempt_2_and_a_stale_report_is_not_taken(
    machines: dict[str, object],
) -> None:
    env, parent, store, workers = _unpack(machines)
    cell_id = CELLS[0]
    (store / "reports").mkdir(parents=True)  # an earlier run's report: done, by a worker long gone
    stale = {"cell_id": cell_id, "run_dir": "", "steps": {"train": "done", "evaluate": "done", "publish": "done"},
             "worker": "ghost", "flow_run_id": "00000000-0000-0000-0000-000000000000"}  # fmt: skip
    (store / "reports" / f"{cell_id}.json").write_text(json.dumps(stale))
    command = [
        str(BIN / "corewarding"), "pipeline", "run", "--matrix", "demo", "--cell", cell_id, "--work-pool", "cpu-pool",
        "--json", "--config", "store.dvc_remote=shared", "--config", "store.sync_interval_s=0.5",
        "--config", "cells.lease_timeout_s=60", "--config", "cells.poll_s=0.5", "schedule.total_steps=4",
    ]  # fmt: skip
    run = subprocess.Popen(command, env=env, cwd=parent, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    killed: list[int] = []
    deadline = time.monotonic() + 200
    while not killed and run.poll() is None and time.monotonic() < deadline:
        cells = _cell_processes(workers)
        if cells and _lease(store, cell_id):  # the cell run is under way on a worker
            for proc in cells:
                proc.kill()  # the cell's process only (as the OOM killer would): its worker lives on
                killed.append(proc.pid)
        time.sleep(0.2)
    assert killed, "no worker started the cell: " + "".join(part[-3000:] for part in run.communicate(timeout=60))
    assert all(proc.poll() is None for proc in workers.values())  # both workers still alive

    out, err = run.communicate(timeout=240)
    assert run.returncode == 0, out[-3000:] + err[-5000:]
    report = json.loads(out)  # --json: stdout is the report alone, the table is on stderr
    (cell,) = report["cells"]
    assert cell["attempt"] == f"{cell_id}#2", cell  # the retry, under its own name
    assert cell["worker"] in workers and cell["flow_run_id"] != stale["flow_run_id"]
    assert cell["steps"] == {"train": "done", "evaluate": "done", "publish": "done", "ingest": "done"}, cell
    table = err[err.rindex("\ncell ") + 1 :]  # the final table, on stderr after the run's log lines
    row = next(line for line in table.splitlines() if line.startswith(cell_id)).split()
    assert row[-2:] == ["2", cell["worker"]]  # its second attempt, and where it ran
    print(table, file=sys.stderr)
    assert json.loads((store / "reports" / f"{cell_id}.json").read_text())["attempt"] == f"{cell_id}#2"
    assert "ended Crashed" in err  # the first attempt's crash is named
