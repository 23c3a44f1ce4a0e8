"""Pool and store mistakes are one line and exit status 2 (a real private Prefect server); a worker whose checkout's
config differs from the parent's refuses the cell, naming both versions."""

from __future__ import annotations

import http.server
import logging
import os
import shutil
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from prefect.client.orchestration import get_client
from prefect.client.schemas.actions import WorkPoolCreate

from corewarding.cli import main
from corewarding.pipeline.cells import plan_cells
from corewarding.pipeline.jobs import cell_job
from corewarding.pipeline.pool_key import KEY_VARIABLE
from corewarding.pipeline.settings import load_settings
from corewarding.pipeline.versions import code_version, config_hash
from corewarding.runtime.pool_checks import answers_without_auth, warn_if_open
from corewarding.runtime.prefect_session import prefect_api
from flows import cell as cell_flow
from flows.cell import cell
from tests.support.net import free_port
from tests.support.repo import REPO

POOL = "checks-pool"
KEY = "4e" * 31 + "a1"  # this machine's pool key (the tests that need none delete it)
CANARY = "hf_canary_4Kp9"


@pytest.fixture(autouse=True)
def pool_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_VARIABLE, KEY)


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
    job = cell_job(plan, settings, None, code_version(worker)).signed(bytes.fromhex(KEY))  # the parent's config hash
    shutil.copytree(REPO / "configs", worker / "configs")
    config = worker / "configs" / "config.yaml"
    text = config.read_text()
    assert "seed: 1 " in text
    config.write_text(text.replace("seed: 1 ", "seed: 2 ", 1))
    monkeypatch.chdir(worker)
    # a worker's own flow run (PREFECT__FLOW_RUN_ID is its id; tests/e2e/test_work_pool_trust.py runs real workers)
    monkeypatch.setattr(cell_flow, "started_from_api", lambda: True)
    state = cell(plan.cell_id, job.to_parameters(), return_state=True)  # type: ignore[call-overload]
    assert state.is_failed()
    message = str(state.message)
    assert "refused by the worker" in message and "\n" not in message.strip(), message
    mine = config_hash(plan_cells(settings.selection)[0].cfg)
    assert f"parent config {job.config_hash}" in message and f"this checkout config {mine}" in message
    assert job.config_hash != mine
    assert not (worker / "runs").exists()  # refused before any work


def test_parent_on_a_pool_refuses_an_override_that_would_read_the_workers_machine(
    api: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = _run("--work-pool", POOL, "--config", f"store.url={tmp_path}", r"+leak=$\{oc.env:" + CANARY + r"\}")
    line = _one_line_error(capsys, code, "override 1 (+leak): a work pool's job may set only", "what-a-job-may-change")
    assert CANARY not in line


def test_parent_worker_and_deploy_without_a_pool_key_say_how_to_make_one(
    api: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(KEY_VARIABLE)
    _one_line_error(
        capsys, _run("--work-pool", POOL, "--config", f"store.url={tmp_path}"), "corewarding pool-key create"
    )
    _one_line_error(capsys, main(["worker", "--pool", POOL]), "worker --pool checks-pool: no pool key")
    _one_line_error(capsys, main(["deploy", "--work-pool", POOL]), "deploy --work-pool: no pool key")
    assert not list(tmp_path.iterdir())  # nothing was started or written


def test_a_job_runs_config_error_names_the_key_and_rule_never_the_environments_value(
    api: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker's own config reads its environment (here a canary standing for a token) and gets a value that
    cannot work: the run fails naming the key and the rule; the value is in neither its state nor its logs."""
    settings = load_settings([], matrix="demo", cells=["gt_grpo__tiny__tiny"])
    plan = plan_cells(settings.selection)[0]
    worker = tmp_path / "worker"
    job = cell_job(plan, settings, None, code_version(worker)).signed(bytes.fromhex(KEY))
    shutil.copytree(REPO / "configs", worker / "configs")
    config = worker / "configs" / "config.yaml"
    text = config.read_text()
    assert "\nbackend: local" in text
    config.write_text(text.replace("\nbackend: local", "\nbackend: ${oc.env:COREWARDING_TEST_CANARY}", 1))
    monkeypatch.setenv("COREWARDING_TEST_CANARY", CANARY)
    monkeypatch.chdir(worker)
    monkeypatch.setattr(cell_flow, "started_from_api", lambda: True)
    state = cell(plan.cell_id, job.to_parameters(), return_state=True)  # type: ignore[call-overload]
    assert state.is_failed()
    message = str(state.message)
    assert "backend: must be one of local, verl" in message and CANARY not in message, message
    assert not (worker / "runs").exists()


def _own_address() -> str | None:
    """This machine's address on its network (not loopback), if it has one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("10.255.255.255", 1))  # no packet is sent: it only picks the outgoing interface
            address = str(probe.getsockname()[0])
        except OSError:
            return None
    return None if address.startswith("127.") else address


def test_an_open_api_warns_only_off_loopback(api: str, caplog: pytest.LogCaptureFixture) -> None:
    """The real server (no credentials) answers an anonymous request; on loopback nobody else reaches it, so no
    warning. The same answer from a network address warns once (served here by a plain HTTP server on this
    machine's address: the probe is all that decides)."""
    assert answers_without_auth(api) and not warn_if_open(api)
    address = _own_address()
    if address is None:
        pytest.skip("this machine has no non-loopback address")

    class Version(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200 if self.path == "/api/admin/version" else 404)
            self.end_headers()
            self.wfile.write(b'"3.8.8"')

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer((address, 0), Version)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with caplog.at_level(logging.WARNING):
            assert warn_if_open(f"http://{address}:{server.server_port}/api")
    finally:
        server.shutdown()
    (line,) = [r.getMessage() for r in caplog.records if "without authentication" in r.getMessage()]
    assert "PREFECT_SERVER_API_AUTH_STRING" in line and "\n" not in line


@pytest.mark.parametrize(
    "command",
    [
        ["pipeline", "run", "--matrix", "demo", "--cell", "gt_grpo__tiny__tiny", "--work-pool", POOL, "--config"],
        ["deploy", "--work-pool", POOL, "--config"],
        ["audit", "--matrix", "paper_v3", "--work-pool", POOL, "--config"],
    ],
)
def test_a_pool_command_without_prefect_api_url_names_it(
    command: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without PREFECT_API_URL these would run on a private server that has no pool and stops at the end (deploy
    exited 0 with its schedules gone; pipeline run said the pool did not exist)."""
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    code = main([*command, f"store.url={tmp_path}"])
    _one_line_error(capsys, code, "needs the pool's Prefect server, and PREFECT_API_URL is not set")


def test_deploy_to_a_server_that_is_down_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    down = f"http://127.0.0.1:{free_port()}/api"
    monkeypatch.setenv("PREFECT_API_URL", down)
    _one_line_error(capsys, main(["deploy", "--work-pool", POOL]), f"the Prefect server at {down} does not answer")


def test_a_cell_run_from_the_api_checks_the_signature_itself(api: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Started by Prefect's plain worker (no vetting), the cell run still refuses a job the pool's key did not sign,
    before anything is composed or written."""
    settings = load_settings([], matrix="demo", cells=["gt_grpo__tiny__tiny"])
    plan = plan_cells(settings.selection)[0]
    job = cell_job(plan, settings, None, code_version(REPO))
    monkeypatch.setattr(cell_flow, "started_from_api", lambda: True)
    for unsigned in (job, job.signed(bytes.fromhex("11" * 32))):
        state = cell(plan.cell_id, unsigned.to_parameters(), return_state=True)  # type: ignore[call-overload]
        assert state.is_failed() and "gt_grpo__tiny__tiny: the job" in str(state.message), state.message
        assert "signed" in str(state.message) or "signature" in str(state.message)


def test_a_scheduled_run_from_the_api_refuses_parameters_of_its_own(api: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pipeline run started through the API (a schedule's, served or on a worker) takes only its schedule's name;
    an override it carries is refused before any step."""
    from flows import pipeline as pipeline_flow

    monkeypatch.setattr(pipeline_flow, "started_from_api", lambda: True)
    state = pipeline_flow.pipeline(  # type: ignore[call-overload]
        schedule="nightly", matrix="demo", overrides=[f"+x={CANARY}"], return_state=True
    )
    assert state.is_failed()
    message = str(state.message)
    assert "pipeline run parameters matrix, overrides: a scheduled run carries only" in message, message
    assert CANARY not in message
