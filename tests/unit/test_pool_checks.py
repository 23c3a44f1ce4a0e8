"""Pool and store mistakes are one line and exit status 2 (a real private Prefect server); a worker whose checkout's
config differs from the parent's refuses the cell, naming both versions."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from prefect.client.orchestration import get_client
from prefect.client.schemas.actions import WorkPoolCreate

from corewarding.cli import main
from corewarding.pipeline.cells import plan_cells
from corewarding.pipeline.jobs import cell_job
from corewarding.pipeline.prefect_session import prefect_api
from corewarding.pipeline.settings import load_settings
from corewarding.pipeline.versions import code_version, config_hash
from flows import cell as cell_flow
from flows.cell import cell
from tests.support.net import free_port
from tests.support.repo import REPO

POOL = "checks-pool"


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with prefect_api(tmp_path_factory.mktemp("checkout")) as url:
        with get_client(sync_client=True) as client:
            client.create_work_pool(WorkPoolCreate(name=POOL, type="process"))
        yield url


def _one_line_error(capsys: pytest.CaptureFixture[str], code: int, *words: str) -> str:
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    lines = [line for line in err.splitlines() if line.startswith("error:") or "Traceback" in line]
    assert len(lines) == 1 and lines[0].startswith("error:"), err
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def _run(*args: str) -> int:
    return main(["pipeline", "run", "--matrix", "demo", "--cell", "gt_grpo__tiny__tiny", *args])


def test_worker_on_an_unknown_pool_is_one_line_and_exit_2(api: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["worker", "--pool", "cheks-pool"])
    _one_line_error(capsys, code, "work pool 'cheks-pool' does not exist", POOL)
    with get_client(sync_client=True) as client:
        assert POOL in {p.name for p in client.read_work_pools()}
        assert "cheks-pool" not in {p.name for p in client.read_work_pools()}  # not created


def test_parent_on_an_unknown_pool_is_one_line_and_exit_2(
    api: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = _run("--work-pool", "cheks-pool", "--config", f"store.url={tmp_path}")
    _one_line_error(capsys, code, "work pool 'cheks-pool' does not exist")


def test_parent_with_the_server_down_is_one_line_and_exit_2(
    api: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    down = f"http://127.0.0.1:{free_port()}/api"
    monkeypatch.setenv("PREFECT_API_URL", down)
    code = _run("--work-pool", POOL, "--config", f"store.url={tmp_path}")
    _one_line_error(capsys, code, f"the Prefect server at {down} does not answer")


def test_parent_with_a_missing_store_path_is_one_line_exit_2_and_creates_nothing(
    api: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "unmounted" / "store"
    code = _run("--work-pool", POOL, "--config", f"store.url={missing}")
    _one_line_error(capsys, code, f"store {missing} does not exist")
    assert not (tmp_path / "unmounted").exists()


@pytest.fixture
def read_only_dir(tmp_path: Path) -> Iterator[Path]:
    """A folder on a read-only tmpfs: even root cannot write there (chmod does not stop root)."""
    mount = tmp_path / "ro-store"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a read-only tmpfs needs root (CI runs as root)")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"mount -t tmpfs failed here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def test_parent_with_a_read_only_store_is_one_line_and_exit_2(
    api: str, read_only_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = _run("--work-pool", POOL, "--config", f"store.url={read_only_dir}")
    _one_line_error(capsys, code, f"store {read_only_dir} cannot be written")
    assert list(read_only_dir.iterdir()) == []


def test_parent_with_an_unknown_dvc_remote_is_one_line_and_exit_2(api: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = _run("--work-pool", POOL, "--config", "store.dvc_remote=no-such-remote")
    _one_line_error(capsys, code, "DVC remote 'no-such-remote' is not configured")


def test_a_worker_whose_config_differs_refuses_the_cell_naming_both_versions(
    api: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = load_settings([], matrix="demo", cells=["gt_grpo__tiny__tiny"])
    plan = plan_cells(settings.selection)[0]
    worker = tmp_path / "worker"  # the worker's checkout: one config value edited (same code version: not in git)
    job = cell_job(plan, settings, None, code_version(worker))  # the parent's resolved config hash
    shutil.copytree(REPO / "configs", worker / "configs")
    config = worker / "configs" / "config.yaml"
    text = config.read_text()
    assert "seed: 1 " in text
    config.write_text(text.replace("seed: 1 ", "seed: 2 ", 1))
    monkeypatch.chdir(worker)
    # a worker's own flow run (PREFECT__FLOW_RUN_ID is its id; tests/e2e/test_work_pool_trust.py runs real workers)
    monkeypatch.setattr(cell_flow, "_started_by_worker", lambda: True)
    state = cell(plan.cell_id, job.to_parameters(), return_state=True)  # type: ignore[call-overload]
    assert state.is_failed()
    message = str(state.message)
    assert "refused by the worker" in message and "\n" not in message.strip(), message
    mine = config_hash(plan_cells(settings.selection)[0].cfg)
    assert f"parent config {job.config_hash}" in message and f"this checkout config {mine}" in message
    assert job.config_hash != mine
    assert not (worker / "runs").exists()  # refused before any work
