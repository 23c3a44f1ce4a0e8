"""Orchestration overhead of the work-pool pipeline, and its speed-up with two workers (issue 13).

Runs the demo matrix on a real Prefect server with process workers started from their own checkouts and a local
shared store, once with one worker and once with two, in fresh copies of the project. Reports the wall time of
each, the time spent in training and evaluation (the train/evaluate task runs), and the per-cell overhead:
(wall - data step - training - evaluation) / cells with one worker, where cells run one after another. The clock
starts once the workers are up (they are long-lived services); they poll the server every WORKER_QUERY_S seconds.
Each worker stands for a machine: it is pinned to a core of its own, with one torch thread, and has the demo's base
model already (built once before the clock starts, as a machine keeps its downloaded models). The timeline of the
flow runs (created, started, ended, and the idle gap between one cell run and the next) is printed for each run.

This machine's speed drifts by tens of percent over minutes (a shared host), which moves the ratio of two runs made
minutes apart: pass a number of rounds to measure one and two workers back to back that many times, one worker
first in odd rounds and two workers first in even ones (a steady drift then favours neither); the figures of every
round and the median ratio are printed.

The server keeps its database in SQLite (Prefect's default), or with ``--database postgres`` in a private PostgreSQL
cluster (Debian's ``postgresql``; a new database for each run), as the README advises for a server that many workers
share: on SQLite, idle workers' polls and the parent's run creations collide ("database is locked") and a creation
then waits about 2 s for Prefect's client to try again.

    .venv/bin/python perf/orchestration_perf.py [ROUNDS] [--database sqlite|postgres]   # 5-6 min a round
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
# The project's tests/ folder (no __init__.py) as the package `tests`: a dependency installs a top-level `tests`
# package into site-packages, which would otherwise win over this namespace folder.
_tests = types.ModuleType("tests")
_tests.__path__ = [str(REPO / "tests")]
sys.modules["tests"] = _tests

from tests.support.postgres import postgres_cluster  # noqa: E402
from tests.support.prefect_server import kill_tree, prefect_server  # noqa: E402
from tests.support.repo import TEST_CACHE_ENV, clone_project  # noqa: E402

BIN = Path(sys.executable).parent
log = logging.getLogger("orchestration_perf")
# How often an idle worker asks the server for new runs (Prefect's default is 10 s; the README recommends 1 s).
WORKER_QUERY_S = 1.0


def _server_times(env: dict[str, str]) -> tuple[dict[str, float], list[dict[str, Any]]]:
    """Total run time of the train/evaluate/data task runs on the server, by task name, and the timeline of the
    flow runs (seconds since the parent's flow run was created)."""
    script = """
import json
from prefect import get_client
runs = []
totals = {}
with get_client(sync_client=True) as client:
    while page := client.read_task_runs(limit=200, offset=len(runs)):  # the API's page limit is 200
        runs += page
    for r in runs:
        if " " in r.name:  # the cell steps: "train <cell id>"
            totals[r.name.split(" ")[0]] = totals.get(r.name.split(" ")[0], 0.0) + r.total_run_time.total_seconds()
        elif r.name.rsplit("-", 1)[0] in ("reproduce-data", "share-data"):
            totals[r.name.rsplit("-", 1)[0]] = r.total_run_time.total_seconds()
    flows = []
    while page := client.read_flow_runs(limit=200, offset=len(flows)):
        flows += page
cells = [f for f in flows if "__" in f.name]  # cell runs are named after their cell id
totals["cell-runs"] = sum(f.total_run_time.total_seconds() for f in cells)
parent = min((f for f in flows if "__" not in f.name), key=lambda f: f.created)
timeline = [{"cell": f.name, "created": (f.created - parent.created).total_seconds(),
             "start": (f.start_time - parent.created).total_seconds(),
             "end": (f.end_time - parent.created).total_seconds()}
            for f in sorted(cells, key=lambda f: f.start_time)]
timeline.append({"cell": "parent", "created": 0.0, "start": (parent.start_time - parent.created).total_seconds(),
                 "end": (parent.end_time - parent.created).total_seconds()})
print(json.dumps({"totals": totals, "timeline": timeline}))
"""
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"reading the task runs failed:\n{out.stderr[-3000:]}")
    found = json.loads(out.stdout.strip().splitlines()[-1])
    return dict(found["totals"]), list(found["timeline"])


def _log_timeline(timeline: list[dict[str, Any]]) -> None:
    """Each flow run's creation, start and end, and the idle gap since the previous cell run ended."""
    log.info("%-48s %8s %8s %8s %8s", "flow run", "created", "start", "end", "gap")
    previous_end = None
    for row in timeline:
        gap = "" if previous_end is None or row["cell"] == "parent" else f"{row['start'] - previous_end:8.1f}"
        log.info("%-48s %8.1f %8.1f %8.1f %8s", row["cell"], row["created"], row["start"], row["end"], gap)
        previous_end = row["end"]


def _one_core(index: int) -> Callable[[], None]:
    """Pin a worker (and its cell runs) to one core: each worker stands for a machine of its own."""
    cores = sorted(os.sched_getaffinity(0))
    return lambda: os.sched_setaffinity(0, {cores[index % len(cores)]})


def _wait_for_workers(env: dict[str, str], pool: str, count: int, timeout_s: float = 120) -> None:
    """Until ``count`` workers of the pool have sent the server their first heartbeat."""
    script = f"""
from prefect import get_client
with get_client(sync_client=True) as client:
    print(len(client.read_workers_for_work_pool({pool!r})))
"""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
        if out.returncode == 0 and int(out.stdout.strip().splitlines()[-1]) >= count:
            return
        time.sleep(1)
    raise TimeoutError(f"{count} worker(s) of pool {pool} did not start within {timeout_s} s")


def measure(n_workers: int, root: Path, database_url: str | None) -> dict[str, float]:
    """One demo run on ``n_workers`` workers; returns its wall time and the task times."""
    parent = clone_project(root / "parent")
    (root / "home").mkdir()
    (root / "store").mkdir()  # the pipeline never creates a missing store folder
    with prefect_server(root / "home", database_url) as env:
        env = {**env, "PREFECT_WORKER_QUERY_SECONDS": str(WORKER_QUERY_S)}
        subprocess.run([str(BIN / "corewarding"), "deploy", "--work-pool", "bench", "--root", str(parent)],
                       env=env, cwd=parent, check=True, capture_output=True)  # fmt: skip
        workers = []
        for i in range(n_workers):
            checkout = clone_project(root / f"w{i}")
            workers.append(subprocess.Popen(
                [str(BIN / "corewarding"), "worker", "--pool", "bench", "--limit", "1"],
                env={**env, "COREWARDING_ROOT": str(checkout), "OMP_NUM_THREADS": "1"}, cwd=checkout,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                preexec_fn=_one_core(i),
            ))  # fmt: skip
        try:
            _wait_for_workers(env, "bench", n_workers)  # workers are long-lived services: their start is not timed
            started = time.perf_counter()
            subprocess.run(
                [str(BIN / "corewarding"), "pipeline", "run", "--matrix", "demo", "--work-pool", "bench",
                 "--config", f"store.url={root / 'store'}"],
                env=env, cwd=parent, check=True, capture_output=True,
            )  # fmt: skip
            wall = time.perf_counter() - started
            log.info("%d worker(s): the demo matrix took %.1f s", n_workers, wall)
            tasks, timeline = _server_times(env)
            _log_timeline(timeline)
        finally:
            for proc in workers:
                kill_tree(proc.pid)
    return {"wall_s": wall, **{f"{k}_s": v for k, v in tasks.items()}}


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rounds", nargs="?", type=int, default=1, help="one and two workers, back to back, this often")
    parser.add_argument("--database", choices=("sqlite", "postgres"), default="sqlite", help="the server's database")
    args = parser.parse_args()
    ratios = []
    with contextlib.ExitStack() as stack:
        models = stack.enter_context(tempfile.TemporaryDirectory(prefix="orch-model-"))
        new_database = stack.enter_context(postgres_cluster()) if args.database == "postgres" else None
        # The demo's base model is built once (a 20 s warm start) and put into every checkout, as a machine keeps
        # its downloaded models: each worker would otherwise build it in its first cell.
        os.environ[TEST_CACHE_ENV] = models
        for number in range(1, args.rounds + 1):
            log.info("round %d of %d (the server on %s)", number, args.rounds, args.database)
            results = {}
            for n in (1, 2) if number % 2 else (2, 1):
                with tempfile.TemporaryDirectory(prefix=f"orch{n}-") as tmp:
                    results[n] = measure(n, Path(tmp), new_database() if new_database else None)
                    log.info("%d worker(s): %s", n, json.dumps({k: round(v, 1) for k, v in results[n].items()}))
            ratios.append(_report(results))
    if args.rounds > 1:
        log.info("two-worker ratio by round (server on %s): %s; median %.2fx (target <= 0.6x)", args.database,
                 ", ".join(f"{r:.2f}" for r in ratios), statistics.median(ratios))  # fmt: skip


def _report(results: dict[int, dict[str, float]]) -> float:
    """A round's figures: the per-cell overhead from the one-worker run, and the two-worker ratio (returned)."""
    one = results[1]
    work = one.get("train_s", 0.0) + one.get("evaluate_s", 0.0) + one.get("reproduce-data_s", 0.0)
    overhead = (one["wall_s"] - work) / 6
    steps = sum(one.get(f"{k}_s", 0.0) for k in ("fetch", "train", "evaluate", "publish"))
    log.info("per cell with one worker: %.1f s in its flow run outside its steps (start-up, lease, store pushes), "
             "%.1f s outside its flow run (worker pick-up, process start, the parent)",
             (one.get("cell-runs_s", 0.0) - steps) / 6,
             (one["wall_s"] - one.get("cell-runs_s", 0.0) - one.get("reproduce-data_s", 0.0)) / 6)  # fmt: skip
    log.info("machine: %s, %d cores; workers poll every %.0f s", platform.processor() or platform.machine(),
             os.cpu_count() or 0, WORKER_QUERY_S)  # fmt: skip
    log.info("each cell run is a new process: its training time includes importing torch and transformers")
    log.info("one worker: wall %.1f s, of which training+evaluation+data %.1f s", one["wall_s"], work)
    log.info("orchestration overhead per cell: %.1f s (target < 10 s)", overhead)
    ratio = results[2]["wall_s"] / one["wall_s"]
    log.info("two workers: wall %.1f s = %.2fx of one worker's (target <= 0.6x); training took %.0f%% longer than "
             "on one worker", results[2]["wall_s"], ratio,
             100 * (results[2].get("train_s", 0.0) / max(one.get("train_s", 0.0), 1e-9) - 1))  # fmt: skip
    return ratio


if __name__ == "__main__":
    main()
