"""The parent's watch over its cell runs: one request per look, however many cells (a real private server)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from prefect import flow, task
from prefect.client.orchestration import get_client
from prefect.states import Completed, Crashed, Running

from corewarding.pipeline.cells import plan_cells
from corewarding.pipeline.jobs import cell_job
from corewarding.pipeline.run_summary import CellReport
from corewarding.pipeline.settings import load_settings
from corewarding.pipeline.store import sharing
from corewarding.runtime.prefect_session import prefect_api
from flows import fanout
from flows.deploy import deploy_to_pool
from flows.fanout import cancel_runs, read_runs
from tests.support.repo import REPO


@flow(name="fanout-probe")
def probe() -> None:
    """Never run: only its flow runs are created."""


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with prefect_api(tmp_path_factory.mktemp("checkout")) as url:
        yield url


def test_read_runs_pages_past_the_apis_limit_and_names_a_deleted_run(api: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fanout, "_PAGE", 4)  # the API's 200, scaled down: 11 runs take three pages
    with get_client(sync_client=True) as client:
        runs = {f"cell-{i:03d}": client.create_flow_run(probe, name=f"cell-{i:03d}").id for i in range(11)}
        found = read_runs(client, runs)
        assert list(found) == list(runs)  # every cell, in the caller's order
        assert all(found[cell].id == run_id and found[cell].name == cell for cell, run_id in runs.items())

        client.delete_flow_run(runs["cell-007"])
        with pytest.raises(RuntimeError, match=r"deleted from the Prefect server.*: cell-007$"):
            read_runs(client, runs)


def test_cancel_runs_cancels_waiting_runs_asks_running_ones_and_leaves_finished_ones(
    api: str, caplog: pytest.LogCaptureFixture
) -> None:
    with get_client(sync_client=True) as client:
        runs = {name: client.create_flow_run(probe, name=name).id for name in ("waiting", "running", "done")}
        client.set_flow_run_state(runs["running"], Running(), force=True)
        client.set_flow_run_state(runs["done"], Completed(), force=True)
        cancel_runs(runs)
        states = {name: client.read_flow_run(run_id).state_name for name, run_id in runs.items()}
    assert states == {"waiting": "Cancelled", "running": "Cancelling", "done": "Completed"}
    assert "cancelled 2 cell run(s) (1 had ended)" in caplog.text


def test_an_interrupt_between_two_submissions_cancels_the_runs_made_so_far(
    api: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COREWARDING_POOL_KEY", "6b" * 32)  # the parent signs each cell job with the pool's key
    deploy_to_pool("fanout-pool", REPO)
    store = "/nowhere/store"  # never reached: no cell run starts
    settings = load_settings([f"store.url={store}"], matrix="demo", work_pool="fanout-pool")
    plans = plan_cells(settings.selection)
    real = fanout.run_deployment
    made: list[UUID] = []

    def interrupted_at_the_third(*args: Any, **kwargs: Any) -> Any:
        if len(made) == 2:
            raise KeyboardInterrupt  # Ctrl-C while the parent is still submitting its cells
        run = real(*args, **kwargs)
        made.append(run.id)
        return run

    monkeypatch.setattr(fanout, "run_deployment", interrupted_at_the_third)
    with pytest.raises(KeyboardInterrupt):
        fanout.run_on_pool(plans, settings, store)
    with get_client(sync_client=True) as client:
        states = [client.read_flow_run(run_id).state_name for run_id in made]
    assert states == ["Cancelled", "Cancelled"]  # no worker will take them after the parent is gone


def test_a_report_left_by_another_flow_run_is_not_taken_as_this_runs(api: str, tmp_path: Path) -> None:
    settings = load_settings([], matrix="demo", cells=["gt_grpo__tiny__tiny"])
    plan = plan_cells(settings.selection)[0]
    job = cell_job(plan, settings, str(tmp_path))
    store = sharing.open_store(str(tmp_path))
    with get_client(sync_client=True) as client:
        old = client.create_flow_run(probe, name=plan.cell_id)
        now = client.create_flow_run(probe, name=plan.cell_id)
        for run in (old, now):
            client.set_flow_run_state(run.id, Completed(), force=True)
        stale = CellReport(plan.cell_id, "", steps={"train": "done"}, worker="w-old", flow_run_id=str(old.id))
        sharing.write_cell_report(store, stale)  # an earlier run's report, still in the store
        run = client.read_flow_run(now.id)
        attempt = fanout._Attempt(plan, job, 1, run.id)
        report, why = fanout.judge(attempt, run, str(tmp_path))
        assert report is None and "no report of this flow run" in why

        sharing.write_cell_report(store, CellReport(plan.cell_id, "", steps={"train": "done"}, flow_run_id=str(run.id)))
        report, why = fanout.judge(attempt, run, str(tmp_path))
        assert report is not None and report.flow_run_id == str(run.id) and why == ""

        client.set_flow_run_state(run.id, Crashed(message="process killed"), force=True)
        report, why = fanout.judge(attempt, client.read_flow_run(run.id), str(tmp_path))
        assert report is None and "ended Crashed: process killed" in why  # its own report, but it crashed


@task(name="fanout-probe-task")
def probe_task() -> None:
    """Never run: only its task runs are created."""


def test_a_crashed_cell_runs_task_runs_are_marked_crashed_not_left_running(api: str) -> None:
    with get_client(sync_client=True) as client:
        run = client.create_flow_run(probe, name="killed")
        running = client.create_task_run(probe_task, run.id, "train", state=Running())
        done = client.create_task_run(probe_task, run.id, "fetch", state=Completed())
        other = client.create_task_run(probe_task, client.create_flow_run(probe).id, "train", state=Running())
        assert fanout.crash_task_runs(client, run.id, "process killed") == 1
        states = [client.read_task_run(t.id).state_name for t in (running, done, other)]
    assert states == ["Crashed", "Completed", "Running"]  # only the dead run's unfinished task run
