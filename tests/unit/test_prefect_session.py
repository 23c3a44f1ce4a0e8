"""prefect_session with real processes: a private Prefect server per checkout that takes the flow runs and is gone
afterwards, also after a SIGTERM in the middle of a flow run or a SIGKILL of its parent; SIGTERM unwinds like Ctrl-C.

The checkout is shared by the module's tests so that the server's database is created (migrated) once."""

from __future__ import annotations

import logging
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from prefect import flow
from prefect.client.orchestration import get_client
from prefect.settings import get_current_settings

from corewarding.interrupts import Interrupted, deferred_interrupts, interruptible, resume_hint
from corewarding.runtime import prefect_session
from corewarding.runtime.prefect_session import prefect_api

SRC = Path(__file__).resolve().parents[2] / "src"
STOP_BUDGET_S = 15  # crash report, log drain (5 s at most), server stop (5 s, then SIGKILL)
STARTED = threading.Event()  # set by the waiting flow, so the test knows when to send its signal


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("checkout")


@pytest.fixture
def no_api_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PREFECT_API_URL", raising=False)


@flow(name="session-hello")
def hello(x: int) -> int:
    return x + 1


@flow(name="session-wait")
def wait_for_signal(limit_s: float) -> str:
    STARTED.set()
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        time.sleep(0.05)
    return "not interrupted"


def _stat(pid: int) -> list[str] | None:
    """Fields of /proc/<pid>/stat after the command name (state, ppid, pgrp, ...); None when gone or a zombie."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    return None if fields[0] in "ZX" else fields


def _children(pid: int) -> list[int]:
    pids = (int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit())
    return [child for child in pids if (fields := _stat(child)) is not None and int(fields[1]) == pid]


def _group_alive(pgid: int) -> bool:
    pids = (int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit())
    return any((fields := _stat(pid)) is not None and int(fields[2]) == pgid for pid in pids)


def _port(url: str) -> str:
    return url.rsplit(":", 1)[1].removesuffix("/api")


def _only_server(parent: int, url: str, before: set[int]) -> int:
    """The one new child of ``parent`` (``before``: its children beforehand, e.g. other tests' worker pools): our
    ``prefect server start`` on the URL's port (no ephemeral server beside it)."""
    children = [pid for pid in _children(parent) if pid not in before]
    assert len(children) == 1, children
    command = Path(f"/proc/{children[0]}/cmdline").read_bytes().split(b"\0")
    assert command[-7:-1] == [b"server", b"start", b"--host", b"127.0.0.1", b"--port", _port(url).encode()]
    assert os.getpgid(children[0]) == children[0]  # its own process group
    return children[0]


def _flow_run_states(checkout: Path) -> dict[str, str]:
    """Flow run id -> state, read from the checkout's own Prefect database (not through any server)."""
    with sqlite3.connect(checkout / ".prefect" / "prefect.db") as db:
        return {str(row[0]): row[1] for row in db.execute("SELECT id, state_type FROM flow_run")}


@pytest.mark.slow
def test_private_server_takes_the_flow_runs_and_is_gone_after_a_sigterm_mid_run(
    checkout: Path, no_api_url: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PREFECT_HOME", "/outer/home")
    settings_before = get_current_settings().api.url
    handler_before = signal.getsignal(signal.SIGTERM)
    sent: list[float] = []

    def terminate_once_waiting() -> None:
        if STARTED.wait(timeout=120):
            sent.append(time.monotonic())
            os.kill(os.getpid(), signal.SIGTERM)

    STARTED.clear()
    before = set(_children(os.getpid()))
    with pytest.raises(Interrupted) as stopped, interruptible(), prefect_api(checkout) as url:
        assert url.startswith("http://127.0.0.1:") and os.environ["PREFECT_API_URL"] == url
        assert os.environ["PREFECT_HOME"] == str(checkout / ".prefect")
        assert get_current_settings().api.url == url
        state = hello(41, return_state=True)
        run_id = state.state_details.flow_run_id
        with get_client(sync_client=True) as client:
            assert client.api_url == url + "/"
            run = client.read_flow_run(run_id)
        server = _only_server(os.getpid(), url, before)
        threading.Thread(target=terminate_once_waiting, daemon=True).start()
        wait_for_signal(30)
    cleanup_s = time.monotonic() - sent[0]

    # The first run went to the private server, whose state is in the checkout.
    assert state.result() == 42
    assert run.name and run.state is not None and run.state.is_completed()
    runs = _flow_run_states(checkout)
    assert runs.pop(str(run_id)) == "COMPLETED"
    assert f"http://127.0.0.1:{_port(url)}" in (checkout / ".prefect" / "server.log").read_text()
    # The SIGTERM unwound like Ctrl-C: Prefect's engine reported the crash while the server still answered, then the
    # server was stopped and the environment, Prefect's settings and the signal handler were put back.
    assert stopped.value.signal_name == "SIGTERM" and stopped.value.exit_code == 143
    assert isinstance(stopped.value.__cause__, KeyboardInterrupt)
    assert list(runs.values()) == ["CRASHED"]
    assert not _group_alive(server)
    assert cleanup_s < STOP_BUDGET_S, cleanup_s
    assert "PREFECT_API_URL" not in os.environ and os.environ["PREFECT_HOME"] == "/outer/home"
    assert get_current_settings().api.url == settings_before
    assert signal.getsignal(signal.SIGTERM) is handler_before


def test_api_url_from_the_environment_starts_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:9/api")
    before = _children(os.getpid())
    with prefect_api(tmp_path) as url:
        assert url == "http://127.0.0.1:9/api"
        assert get_current_settings().api.url == url  # even when set after prefect was imported
        assert _children(os.getpid()) == before
    assert not (tmp_path / ".prefect").exists()


def _python(script: str, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    env.pop("PREFECT_API_URL", None)
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(script), *args], env=env, stdout=subprocess.PIPE, text=True
    )


def _wait_gone(pgid: int, timeout_s: float) -> float:
    """Seconds until no live process is left in the group (fails after ``timeout_s``)."""
    start = time.monotonic()
    while _group_alive(pgid):
        assert time.monotonic() - start < timeout_s, f"process group {pgid} still alive after {timeout_s} s"
        time.sleep(0.05)
    return time.monotonic() - start


@pytest.mark.slow
def test_the_server_dies_with_its_parent_even_on_sigkill(checkout: Path) -> None:
    parent = _python(
        """
        import sys, time
        from pathlib import Path
        from corewarding.runtime.prefect_session import prefect_api

        with prefect_api(Path(sys.argv[1])) as url:
            print("ready", url, flush=True)
            time.sleep(120)
        """,
        str(checkout),
    )
    try:
        assert parent.stdout is not None and parent.stdout.readline().startswith("ready ")
        [server] = _children(parent.pid)
        parent.kill()
        parent.wait()
        _wait_gone(server, timeout_s=5)
    finally:
        parent.kill()
        parent.wait()


def test_sigterm_unwinds_like_ctrl_c() -> None:
    child = _python(
        """
        import time
        from corewarding.interrupts import Interrupted, interruptible

        try:
            with interruptible():
                try:
                    print("looping", flush=True)
                    while True:
                        time.sleep(0.01)
                except KeyboardInterrupt as interrupt:
                    print("unwound by", interrupt, flush=True)
                    raise
        except Interrupted as stopped:
            print(stopped.signal_name, stopped.exit_code, flush=True)
        """
    )
    assert child.stdout is not None and child.stdout.readline() == "looping\n"
    child.send_signal(signal.SIGTERM)
    sent = time.monotonic()
    out, _ = child.communicate(timeout=2)
    assert time.monotonic() - sent < 2
    assert child.returncode == 0
    assert out.splitlines() == ["unwound by SIGTERM", "SIGTERM 143"]


def test_resume_hint_names_the_command() -> None:
    assert resume_hint("corewarding pipeline run --cell a") == (
        "interrupted; nothing is lost: run `corewarding pipeline run --cell a` to resume (finished steps are skipped)"
    )


def _signal_self(sig: signal.Signals) -> None:
    os.kill(os.getpid(), sig)
    time.sleep(1)  # the handler runs here, raising KeyboardInterrupt
    raise AssertionError("the signal handler did not run")


def test_a_signal_wrapped_in_a_librarys_own_error_still_ends_as_the_interruption() -> None:
    # pydantic's serializer turns a KeyboardInterrupt raised inside it into PydanticSerializationError (seen in CI)
    before = signal.getsignal(signal.SIGINT)  # not always Python's default: a background job's SIGINT is ignored
    with pytest.raises(Interrupted) as stopped, interruptible():
        try:
            _signal_self(signal.SIGINT)
        except KeyboardInterrupt as interrupt:
            raise ValueError("Error calling function `_ser_model`: KeyboardInterrupt: SIGINT") from interrupt
    assert stopped.value.exit_code == 130
    assert signal.getsignal(signal.SIGINT) is before  # the handler in place before is back


def test_a_swallowed_signal_still_ends_the_block_as_interrupted() -> None:
    def swallowing_flow() -> str:
        try:
            _signal_self(signal.SIGTERM)
        except KeyboardInterrupt:
            return "failed state"  # what an orchestrator does with an exception inside a task
        return "completed"

    with pytest.raises(Interrupted) as stopped, interruptible():
        assert swallowing_flow() == "failed state"
    assert stopped.value.signal_name == "SIGTERM"
    assert stopped.value.exit_code == 143


def test_an_error_without_a_signal_passes_through_unchanged() -> None:
    with pytest.raises(ValueError, match="bad config"), interruptible():
        raise ValueError("bad config")


def test_a_signal_during_deferred_cleanup_waits_for_the_cleanup_then_ends_the_block() -> None:
    # CI: a SIGTERM landing in the drain of Prefect's log queue left its worker without the stop marker and the
    # process hung in Prefect's exit hook; the cleanup now finishes first and the signal ends the block after it.
    steps = []
    with pytest.raises(Interrupted) as stopped, interruptible():
        with deferred_interrupts():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.2)  # the handler runs here and only records the signal
            steps.append("cleanup finished")
        steps.append("after the cleanup")  # never reached: the held-back signal is raised as the block ends
    assert steps == ["cleanup finished"]
    assert stopped.value.exit_code == 143


def test_a_signal_while_the_private_server_starts_is_raised_after_the_fork_and_the_server_is_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CI (busy machine): SIGINT landed while Popen forked the server. Python ran the handler inside logging's
    at-fork hook, which swallowed the KeyboardInterrupt with logging's lock held, and every thread that logged
    then waited forever. The start is now a deferred block: the signal ends the run once Popen has returned, and
    the server it started is stopped."""
    started: list[subprocess.Popen[bytes]] = []
    real_start = prefect_session._start_server

    def start_then_signal(home: Path, port: int) -> subprocess.Popen[bytes]:
        server = real_start(home, port)
        started.append(server)
        os.kill(os.getpid(), signal.SIGINT)  # as if it came during the fork
        time.sleep(0.2)  # the handler runs here and only records it
        return server

    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.setattr(prefect_session, "_start_server", start_then_signal)
    with pytest.raises(Interrupted) as stopped, interruptible(), prefect_api(tmp_path):
        pytest.fail("the block ran although the signal came first")
    assert stopped.value.exit_code == 130
    (server,) = started
    assert server.poll() is not None  # stopped on the way out, not left behind
    worker = threading.Thread(target=logging.getLogger("corewarding.test").warning, args=("logging works",))
    worker.start()
    worker.join(timeout=10)
    assert not worker.is_alive()  # no lock left held by the interrupted start
