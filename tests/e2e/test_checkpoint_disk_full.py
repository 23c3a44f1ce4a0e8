"""A full disk while saving a checkpoint: `corewarding train` ends with one line naming the checkpoint and the space it
needs, run.json says failed, and no temporary file is left behind.

The run folder sits on a 1 MB tmpfs (the tiny model's checkpoint is about 2.4 MB), so the kernel itself answers
ENOSPC; where mounting is not allowed (not root), a file-size limit in the child (RLIMIT_FSIZE, EFBIG) stands in.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from corewarding.config import compose_config

CELL = "gt_grpo__tiny__tiny"
LIMIT = 1 << 20


def _file_size_limit() -> None:
    """In the child: writes past LIMIT bytes fail with EFBIG instead of killing the process with SIGXFSZ."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, LIMIT))


@pytest.fixture(params=["tmpfs", "rlimit"])
def small_disk(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Path, Callable[[], None] | None]]:
    """A folder where a checkpoint cannot be written, and the child's preexec function (if any)."""
    mount = tmp_path / "small"
    mount.mkdir()
    mounted = request.param == "tmpfs" and os.geteuid() == 0 and subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={LIMIT}", "tmpfs", str(mount)], capture_output=True
    ).returncode == 0  # fmt: skip
    try:
        yield mount, (None if mounted else _file_size_limit)
    finally:
        if mounted:
            subprocess.run(["umount", str(mount)], check=True)


def test_disk_full_while_saving_ends_with_one_line_a_failed_record_and_no_temp_files(
    artifacts_dir: Path, small_disk: tuple[Path, Callable[[], None] | None]
) -> None:
    runs, preexec = small_disk
    args = [
        "experiment=tiny_cpu", "method=gt_grpo", f"paths.artifacts_dir={artifacts_dir}", f"paths.runs_dir={runs}",
        "schedule.total_steps=2", "schedule.save_freq=1", "schedule.val_max_samples=4", "grpo.max_response_length=24",
    ]  # fmt: skip
    compose_config(args)  # fail fast on a bad override before starting a process
    cmd = [sys.executable, "-m", "corewarding.cli", "train", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, preexec_fn=preexec)

    run_dir = runs / CELL
    checkpoint = run_dir / "checkpoints" / "global_step_1"
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: cannot write checkpoint {checkpoint} "), last
    assert "needs about" in last and "MB free" in last, last
    record = json.loads((run_dir / "run.json").read_text())
    assert record["status"] == "failed" and "cannot write checkpoint" in record["error"]
    left = sorted(str(p.relative_to(run_dir)) for p in run_dir.rglob("*"))
    assert not [p for p in left if "tmp" in p], left
    assert not list((run_dir / "checkpoints").iterdir())
