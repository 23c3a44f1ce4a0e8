"""What verl's CPU end-to-end tests share: a watch on the run's listening sockets, waiting for a condition."""

from __future__ import annotations

import contextlib
import ipaddress
import threading
import time
from collections.abc import Callable
from typing import Any

SFT_STEPS = 200  # a warm start of the tiny Qwen3, so some answers are boxed and right: rewards are not all zero
TAG_ENV = "COREWARDING_E2E_TAG"  # set in every process of the run (Ray's and ours), to find their sockets


def has_tag(proc: Any, tag: str) -> bool:
    """Whether a ``psutil.Process``'s environment carries ``tag``; psutil errors propagate.

    Not every process of the run shows it: a process that rewrites its title (setproctitle: Ray's
    ``ray::DashboardAgent`` and ``ray::RuntimeEnvAgent``) overwrites the start of its environment block as /proc shows
    it, the tag too at times. Those descend from a process that shows it (the raylet): ``in_run``."""
    return proc.environ().get(TAG_ENV) == tag


def in_run(proc: Any, tag: str) -> bool:
    """Whether a ``psutil.Process`` belongs to the run: it or one of its ancestors carries ``tag``."""
    import psutil

    for candidate in (proc, *proc.parents()):
        with contextlib.suppress(psutil.AccessDenied):  # an ancestor of another user's (pid 1, for one)
            if has_tag(candidate, tag):
                return True
    return False


def is_loopback(ip: str) -> bool:
    """127.0.0.0/8 or ::1, also written as an IPv4-mapped IPv6 address (``::ffff:127.0.0.1``, a dual-stack socket)."""
    address = ipaddress.ip_address(ip)
    mapped = getattr(address, "ipv4_mapped", None)
    return (mapped or address).is_loopback


class ListenWatch:
    """Samples the listening sockets of the tagged processes while it runs; ``outside`` names any not on loopback."""

    def __init__(self, tag: str) -> None:
        self.tag = tag
        self.seen: dict[tuple[str, int], str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _tagged(self, pid: int) -> str | None:
        import psutil

        try:
            proc = psutil.Process(pid)
            return proc.name() if in_run(proc, self.tag) else None
        except (psutil.Error, OSError):
            return None

    def sample(self) -> None:
        import psutil

        for conn in psutil.net_connections(kind="inet"):
            if conn.status != psutil.CONN_LISTEN or conn.pid is None or not conn.laddr:
                continue
            key = (conn.laddr.ip, conn.laddr.port)
            if key not in self.seen:
                name = self._tagged(conn.pid)
                if name is not None:
                    self.seen[key] = name

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(1.0)

    def __enter__(self) -> ListenWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def outside(self) -> list[str]:
        return [
            f"{name} listens on {ip}:{port}" for (ip, port), name in sorted(self.seen.items()) if not is_loopback(ip)
        ]


def kill_run(tag: str, driver_pid: int) -> int:
    """SIGKILL a launch as a crashed node would be: its driver's process group and every Ray worker and vLLM process
    carrying ``tag`` (the shared Ray head's own processes stay). Killing the driver alone is not enough: its actors
    run on until Ray notices the driver is gone, long enough to train another step. Returns the processes killed."""
    import os
    import signal

    import psutil

    with contextlib.suppress(ProcessLookupError):
        os.killpg(driver_pid, signal.SIGKILL)
    victims = []
    for proc in psutil.process_iter(["name"]):
        name = proc.info["name"] or ""
        if not (name.startswith("ray::") or name.startswith("VLLM")):
            continue
        with contextlib.suppress(psutil.Error):
            if has_tag(proc, tag):
                proc.kill()
                victims.append(proc)
    psutil.wait_procs(victims, timeout=60)
    return len(victims)


def run_processes(tag: str) -> list[Any]:
    """The live processes (``psutil.Process``) of one run, by pid: those whose environment carries ``tag`` and all
    their descendants (Ray's agents and workers are the raylet's children; see ``has_tag``); never this process."""
    import os

    import psutil

    me = os.getpid()
    found: dict[int, Any] = {}
    for proc in psutil.process_iter():
        if proc.pid == me or proc.pid in found:
            continue
        with contextlib.suppress(psutil.Error, OSError):  # gone, a zombie, or another user's (no access)
            if has_tag(proc, tag):
                found[proc.pid] = proc
                for child in proc.children(recursive=True):
                    found.setdefault(child.pid, child)
    found.pop(me, None)
    return [found[pid] for pid in sorted(found)]


def stop_tagged(tag: str, grace: float = 15.0) -> list[int]:
    """Stop the processes of one run (``run_processes``: the shared Ray head's, its agents and workers, vLLM's):
    SIGTERM, then SIGKILL whatever is still alive after ``grace`` seconds (Ray's agents ignore SIGTERM). The whole set
    is found before any signal, as a dying raylet's children are no longer its descendants. ``ray stop --force``
    would stop every Ray on the machine, another user's too. Returns the pids signalled."""
    import psutil

    procs = run_processes(tag)
    for proc in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.terminate()
    _, alive = psutil.wait_procs(procs, timeout=grace)
    for proc in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()
    psutil.wait_procs(alive, timeout=grace)
    return [proc.pid for proc in procs]


def wait_for(condition: Callable[[], bool], timeout: float, what: str, poll: float = 0.2) -> None:
    """Wait until ``condition()`` is true; fail naming ``what`` after ``timeout`` seconds (a hang guard)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(poll)
