"""Servers the tests start on 127.0.0.1: a free port, and waiting until a health URL answers."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_healthy(url: str, proc: subprocess.Popen, output: Callable[[], str], timeout: float = 90) -> None:  # type: ignore[type-arg]
    """Poll ``url`` until it answers 200; fail with the server's output if it exits or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as reply:
                if reply.status == 200:
                    return
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"{url} did not answer: {output()[-3000:]}")
        time.sleep(0.3)


def start_dashboard(db: Path, port: int) -> subprocess.Popen[str]:
    """``corewarding dashboard`` on ``db`` in its own process group, its output readable from the process."""
    return subprocess.Popen(
        [sys.executable, "-m", "corewarding.cli", "dashboard", "--db", str(db), "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group: a cleanup with killpg reaches anything it left behind
    )


@contextmanager
def dashboard_server(db: Path) -> Iterator[str]:
    """``corewarding dashboard`` on ``db`` at a free port, healthy; yields its URL and stops its process group."""
    port = free_port()
    proc = start_dashboard(db, port)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(f"{url}/_stcore/health", proc, lambda: proc.communicate()[0])
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
