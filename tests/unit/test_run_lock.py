"""The run folder lock: held by one process at a time, names its holder, released when the holder dies."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from corewarding.run_folder import LOCK as LOCK_FILE
from corewarding.training.errors import RunInUseError
from corewarding.training.local.run_lock import run_lock

HOLD = "import sys, time; from pathlib import Path; from corewarding.training.local.run_lock import run_lock\n" \
    "with run_lock(Path(sys.argv[1])):\n    print('held', flush=True)\n    time.sleep(120)\n"  # fmt: skip


def test_a_held_run_folder_is_refused_with_the_holders_pid_until_the_holder_dies(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(run_dir)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        refused = rf"{run_dir} is in use by another trainer \(pid {holder.pid}\)"
        with pytest.raises(RunInUseError, match=refused), run_lock(run_dir):
            pass
    finally:
        holder.kill()  # SIGKILL: no cleanup runs, the kernel drops the lock
        holder.wait()
    with run_lock(run_dir):
        assert (run_dir / LOCK_FILE).read_text().split() == [str(os.getpid())]


def test_the_lock_is_released_on_exit_and_on_an_exception(tmp_path: Path) -> None:
    with pytest.raises(KeyError), run_lock(tmp_path):
        raise KeyError("boom")
    with run_lock(tmp_path):
        pass
