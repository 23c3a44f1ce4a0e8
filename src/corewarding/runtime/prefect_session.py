"""A private Prefect API server per checkout for one pipeline run (signals: ``corewarding.interrupts``).

Why: without an API URL Prefect runs in ephemeral mode: it starts a temporary server of its own and keeps its state
in ``~/.prefect``, shared by every checkout on the machine; a Ctrl-C or SIGTERM leaves that server running, and SIGTERM
kills Python without running any cleanup. Here the server is ours: its state lives in ``<checkout>/.prefect``, it is
stopped when the run ends however it ends, and the kernel stops it if we are killed outright.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from corewarding.interrupts import deferred_interrupts

log = logging.getLogger(__name__)

HOME_DIR = ".prefect"  # git- and DVC-ignored
SERVER_LOG = "server.log"
STOP_GRACE_S = 5.0
DRAIN_TIMEOUT_S = 5.0
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def checkout_prefect_home(root: Path) -> Path:
    """``<root>/.prefect``, created: each checkout keeps its own Prefect state (database, results, server log)."""
    home = Path(root).absolute() / HOME_DIR
    home.mkdir(parents=True, exist_ok=True)
    return home


@contextmanager
def prefect_api(root: Path, startup_timeout_s: float = 180) -> Iterator[str]:
    """Yield the Prefect API URL for this run: ``$PREFECT_API_URL`` if set (nothing is started), otherwise that of a
    private ``prefect server start`` whose state is in ``checkout_prefect_home(root)``, stopped on the way out.

    Inside, ``PREFECT_API_URL`` and ``PREFECT_HOME`` are set in ``os.environ`` (child processes inherit them) and in
    Prefect's settings of this process, which were read when ``prefect`` was imported. Use it from the main thread:
    the server is bound to the thread that started it (the kernel's parent-death signal fires when that thread ends).
    """
    external = os.environ.get("PREFECT_API_URL")
    if external:
        log.info("Prefect API from PREFECT_API_URL: %s", external)
        with _prefect_settings(external, home=None), on_the_console(_NoRunTraceback()):
            yield external
        return
    home = checkout_prefect_home(root)
    port = _free_port()
    url = f"http://127.0.0.1:{port}/api"
    started = time.monotonic()
    # No KeyboardInterrupt inside the fork: the preexec_fn makes Python run its at-fork hooks, and one raised in
    # logging's hook is swallowed ("Exception ignored") with logging's lock still held, so every other thread that
    # logs waits forever. A signal then is raised once Popen has returned and the server is ours to stop.
    server: subprocess.Popen[bytes] | None = None
    try:
        with deferred_interrupts():  # a signal held here is raised as the block ends, inside this try
            server = _start_server(home, port)
        _wait_healthy(url, server, home / SERVER_LOG, startup_timeout_s)
        log.info("private Prefect server %s (pid %d) up in %.1f s, state in %s", url, server.pid,
                 time.monotonic() - started, home)  # fmt: skip
        with (
            _environment(PREFECT_API_URL=url, PREFECT_HOME=str(home)),
            _prefect_settings(url, home=home),
            on_the_console(_NoRunTraceback(), _NoPrivateLinks(url)),
        ):
            try:
                yield url
            finally:
                with deferred_interrupts():  # cut half-way, Prefect's exit hook waits forever on a dead server
                    try:  # an interrupt can land between a run's creation and its start
                        _cancel_unfinished_runs()
                    except Exception as exc:  # never hide why the run is ending
                        log.warning("could not cancel the runs left unfinished: %s", exc)
                    _drain_prefect_services()  # queued logs and events go out while the server still answers
    finally:
        if server is not None:
            with deferred_interrupts():
                _stop(server)


RUN_LOGGERS = ("prefect.flow_runs", "prefect.task_runs")  # Prefect's loggers of a failed run's exception


class _NoRunTraceback(logging.Filter):
    """On a console handler: a flow or task run's failure is logged as its one line, without the traceback Prefect
    attaches (the step's error is in the report and the ``error:`` line). With DEBUG logging (``-v``) it stays."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.name in RUN_LOGGERS and not logging.getLogger().isEnabledFor(logging.DEBUG):
            record.exc_info, record.exc_text = None, None  # after Prefect's own API handler sent it to the server
        return True


class _NoPrivateLinks(logging.Filter):
    """Drops Prefect's "View at <url>" lines that point at the private server: it stops when the command ends, so
    the link would be dead by the time anyone follows it."""

    def __init__(self, api_url: str) -> None:
        super().__init__()
        self.prefix = "View at " + api_url.removesuffix("/api")

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.name in RUN_LOGGERS and record.getMessage().startswith(self.prefix))


@contextmanager
def on_the_console(*filters: logging.Filter) -> Iterator[None]:
    """Inside, the root logger's handlers (the console) apply ``filters``: Prefect's own API handler, which sends
    the logs to the server, is not a root handler and keeps everything."""
    handlers = list(logging.getLogger().handlers)
    for handler in handlers:
        for one in filters:
            handler.addFilter(one)
    try:
        yield
    finally:
        for handler in handlers:
            for one in filters:
                handler.removeFilter(one)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _die_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` that asks the kernel to SIGTERM the child when we die, even by SIGKILL (Linux only)."""
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up here: the child should do as little as it can
    parent = os.getpid()

    def preexec() -> None:
        if prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
        if os.getppid() != parent:  # we died before the request was in place
            os.kill(os.getpid(), signal.SIGTERM)

    return preexec


def _start_server(home: Path, port: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    command = [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port)]
    with open(home / SERVER_LOG, "wb") as output:  # the last run's log; the child keeps its own descriptor
        return subprocess.Popen(
            command, env=env, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT,
            process_group=0, preexec_fn=_die_with_parent(),
        )  # fmt: skip


def _wait_healthy(url: str, server: subprocess.Popen[bytes], log_file: Path, timeout_s: float) -> None:
    """Poll ``<url>/health`` until it answers; stop with the server's log if it exits or ``timeout_s`` passes."""
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never through an http_proxy
    deadline = time.monotonic() + timeout_s
    while True:
        with suppress(OSError), direct.open(f"{url}/health", timeout=2) as reply:
            if reply.status == 200:
                return
        if server.poll() is not None:
            raise RuntimeError(f"the Prefect server exited ({server.returncode}): {_tail(log_file)}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"the Prefect server did not answer {url} in {timeout_s:.0f} s: {_tail(log_file)}")
        time.sleep(0.2)


def _tail(path: Path, chars: int = 2000) -> str:
    return path.read_text(errors="replace")[-chars:] if path.is_file() else "(no log)"


def _stop(server: subprocess.Popen[bytes]) -> None:
    """SIGTERM the server's process group, wait up to ``STOP_GRACE_S``, then SIGKILL whatever is left of it."""
    with suppress(ProcessLookupError):
        os.killpg(server.pid, signal.SIGTERM)
    try:
        server.wait(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        log.warning("the Prefect server (pid %d) ignored SIGTERM for %.0f s: killing it", server.pid, STOP_GRACE_S)
    finally:  # also when a second Ctrl-C lands while we wait
        with suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGKILL)
        server.wait()


@contextmanager
def _environment(**values: str) -> Iterator[None]:
    old = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in old.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextmanager
def _prefect_settings(url: str, home: Path | None) -> Iterator[None]:
    """Point this process's Prefect at ``url``. Prefect reads the environment once, at import, into a global
    settings context; ``temporary_settings`` covers this thread and what copies its context, and the global context
    is swapped too for threads that start with an empty one (Prefect's log and event workers): otherwise those
    would find no API URL and start an ephemeral server of their own. ``prefect_test_harness`` does the same."""
    import prefect.context  # prefect: imported when used
    from prefect.settings import (  # prefect: imported when used
        PREFECT_API_URL,
        PREFECT_HOME,
        temporary_settings,
    )

    updates = {PREFECT_API_URL: url}
    if home is not None:
        updates[PREFECT_HOME] = str(home)  # moves the result storage (task caches) into the checkout as well
    previous_global = prefect.context.GLOBAL_SETTINGS_CONTEXT
    with temporary_settings(updates=updates):
        prefect.context.GLOBAL_SETTINGS_CONTEXT = prefect.context.get_settings_context()
        try:
            yield
        finally:
            prefect.context.GLOBAL_SETTINGS_CONTEXT = previous_global


def _cancel_unfinished_runs() -> None:
    """On the way out of a private server (this checkout's alone): cancel the flow and task runs still pending or
    running, such as a run created by the engine just before a Ctrl-C reached it, so none is left in the database."""
    from prefect import get_client  # prefect: imported when used
    from prefect.client.schemas import filters  # prefect: imported when used
    from prefect.client.schemas.objects import StateType  # prefect: imported when used
    from prefect.states import Cancelled  # prefect: imported when used

    open_states = [StateType.PENDING, StateType.RUNNING, StateType.CANCELLING]
    with get_client(sync_client=True) as client:
        flow_runs = client.read_flow_runs(
            flow_run_filter=filters.FlowRunFilter(
                state=filters.FlowRunFilterState(type=filters.FlowRunFilterStateType(any_=open_states))
            )
        )
        task_runs = client.read_task_runs(
            task_run_filter=filters.TaskRunFilter(
                state=filters.TaskRunFilterState(type=filters.TaskRunFilterStateType(any_=open_states))
            )
        )
        for flow_run in flow_runs:
            client.set_flow_run_state(flow_run.id, Cancelled(message="the pipeline run ended"), force=True)
        for task_run in task_runs:
            client.set_task_run_state(task_run.id, Cancelled(message="the pipeline run ended"), force=True)
    if flow_runs or task_runs:
        log.info("cancelled %d flow run(s) and %d task run(s) left unfinished", len(flow_runs), len(task_runs))


def _drain_prefect_services() -> None:
    """Send what Prefect's background services (logs, events) still hold; they share one registry."""
    from prefect.logging.handlers import APILogWorker  # prefect: imported when used

    APILogWorker.drain_all(timeout=DRAIN_TIMEOUT_S)
