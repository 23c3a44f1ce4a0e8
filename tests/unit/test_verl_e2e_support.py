"""The verl end-to-end run's process helpers (``tests/support/verl_e2e.py``): its teardown stops the processes of
the run, those carrying the run's tag and their descendants, and no other (``ray stop --force`` stopped every Ray on
the machine); and the repository's ``tests`` package is importable outside pytest (verl's wheel ships a top-level
``tests`` that shadowed it)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil

from tests.support.verl_e2e import TAG_ENV, in_run, run_processes, stop_tagged

REPO_ROOT = Path(__file__).resolve().parents[2]
SLEEP = "import time; time.sleep(120)"
# a process of the run that starts a child whose environment shows no tag (as Ray's agents, whose title rewrite
# overwrites the environment block /proc shows), prints the child's pid, sleeps
PARENT = (
    "import os, subprocess, sys, time\n"
    f"env = {{k: v for k, v in os.environ.items() if k != {TAG_ENV!r}}}\n"
    f"child = subprocess.Popen([sys.executable, '-c', {SLEEP!r}], env=env)\n"
    "print(child.pid, flush=True)\n"
    "time.sleep(120)\n"
)


def gone(pid: int, timeout: float = 30) -> bool:
    """Whether ``pid`` exits within ``timeout`` (a zombie counts as exited: an orphan waits for pid 1 to reap it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


def test_stop_tagged_stops_the_tagged_process_and_its_descendants_only() -> None:
    tag = uuid.uuid4().hex
    untagged_env = {k: v for k, v in os.environ.items() if k != TAG_ENV}
    tagged = subprocess.Popen(
        [sys.executable, "-c", PARENT], env={**untagged_env, TAG_ENV: tag}, stdout=subprocess.PIPE, text=True
    )
    untagged = subprocess.Popen([sys.executable, "-c", SLEEP], env=untagged_env)
    other_run = subprocess.Popen([sys.executable, "-c", SLEEP], env={**untagged_env, TAG_ENV: uuid.uuid4().hex})
    assert tagged.stdout is not None
    grandchild = int(tagged.stdout.readline())
    try:
        assert not psutil.Process(grandchild).environ().get(TAG_ENV)  # it shows no tag of its own
        assert in_run(psutil.Process(grandchild), tag) and not in_run(psutil.Process(untagged.pid), tag)
        assert [p.pid for p in run_processes(tag)] == sorted([tagged.pid, grandchild])
        assert stop_tagged(tag, grace=30) == sorted([tagged.pid, grandchild])
        assert gone(tagged.pid) and gone(grandchild), "a process of the run is still running"
        assert untagged.poll() is None and other_run.poll() is None, "a process without the run's tag was stopped"
        assert run_processes(tag) == []
    finally:
        for proc in (tagged, untagged, other_run):
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=30)
        if not gone(grandchild, timeout=0.1):
            os.kill(grandchild, 9)


def test_the_repositorys_tests_package_is_importable_outside_pytest() -> None:
    """A plain interpreter in the repository root: verl's own ``tests`` package (removed from site-packages by
    ``tools/drop_verl_tests.py`` at install) must not shadow this repository's namespace package."""
    probe = "import tests.support.verl_e2e as m; print(m.__file__)"
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert Path(out.stdout.strip()) == REPO_ROOT / "tests" / "support" / "verl_e2e.py"
