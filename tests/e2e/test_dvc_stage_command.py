"""The DVC stages find the corewarding command themselves: `.venv/bin/dvc repro` works without .venv/bin on PATH
(a fresh clone after `make install`), and with no .venv it uses the one on PATH (the GPU image)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.repo import TEST_CACHE_ENV, clone_project, dvc_bin

VENV = Path(sys.executable).parent.parent
BARE_PATH = "/usr/bin:/bin"  # git and sh, no corewarding


def _repro(clone: Path, path: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": path, "DVC_NO_ANALYTICS": "1", "HF_HUB_OFFLINE": "1"}
    env.pop("COREWARDING_CONFIG_DIR", None)
    return subprocess.run([str(dvc_bin()), "repro", *args, "tiny_data"], cwd=clone, env=env, capture_output=True,
                          text=True, timeout=120)  # fmt: skip


@pytest.mark.slow
def test_a_stage_runs_the_checkouts_corewarding_without_it_on_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not (VENV / "bin" / "corewarding").exists():
        pytest.skip("corewarding is not installed in this interpreter's environment")
    monkeypatch.delenv(TEST_CACHE_ENV, raising=False)  # the stage needs no tiny model: the clone is built without
    clone = clone_project(tmp_path)
    output = clone / "artifacts/tiny-data/train.parquet"

    (clone / ".venv").symlink_to(VENV)  # as `make install` leaves a clone
    done = _repro(clone, BARE_PATH)
    assert done.returncode == 0 and output.is_file(), done.stdout[-2000:] + done.stderr[-2000:]

    (clone / ".venv").unlink()  # the GPU image: no .venv, its environment on PATH
    output.unlink()
    done = _repro(clone, f"{VENV / 'bin'}:{BARE_PATH}", "--force")
    assert done.returncode == 0 and output.is_file(), done.stdout[-2000:] + done.stderr[-2000:]

    done = _repro(clone, BARE_PATH, "--force")  # neither: one line that says what to do
    assert done.returncode != 0
    assert "corewarding is not installed" in done.stdout + done.stderr and "make install" in done.stdout + done.stderr
