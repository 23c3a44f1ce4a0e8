"""`corewarding dashboard` as a process: killing the PID it was started with stops the server, SIGKILL included."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from contextlib import suppress
from pathlib import Path

import psutil
import pytest

from tests.support.net import free_port, start_dashboard, wait_healthy


def _answers(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _streamlit_serving(port: int) -> list[psutil.Process]:
    """Processes running ``streamlit`` with ``--server.port <port>`` on their command line."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info["cmdline"] or []
        if "streamlit" in cmdline and str(port) in cmdline:
            found.append(proc)
    return found


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_killing_the_command_stops_the_server(synthetic_store: Path, sig: signal.Signals) -> None:
    port = free_port()
    proc = start_dashboard(synthetic_store, port)
    try:
        wait_healthy(f"http://127.0.0.1:{port}/_stcore/health", proc, lambda: proc.communicate()[0])
        assert _streamlit_serving(port)  # what the check below looks for is there while it serves
        os.kill(proc.pid, sig)
        proc.wait(timeout=30)
        deadline = time.monotonic() + 5
        while (_answers(port) or _streamlit_serving(port)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _answers(port), f"port {port} still answers after {sig.name} to the dashboard's PID"
        assert _streamlit_serving(port) == []
    finally:
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        with suppress(subprocess.TimeoutExpired):
            proc.communicate(timeout=10)


def test_a_busy_port_is_named_before_anything_starts(synthetic_store: Path) -> None:
    """A second dashboard on a port another server holds fails at once in one line with a --port hint, and never
    says it serves there."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "corewarding.cli", "dashboard", "--db", str(synthetic_store), "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (
        f"error: port {port} on 127.0.0.1 is in use (another dashboard?): pick a free one with --port, "
        f"e.g. --port {port + 1}"
    )
    assert "dashboard on" not in done.stdout
