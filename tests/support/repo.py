"""A throwaway copy of the project as a git + DVC repository, and dvc run inside it (for DVC and flow tests)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TEST_CACHE_ENV = "COREWARDING_TEST_CACHE"
_FIXED_DATE = {"GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z"}


def clone_project(tmp_path: Path) -> Path:
    """Copy the working tree's tracked and unignored files into a fresh git repository.

    ``dvc.lock`` as git tracks it (empty), not this checkout's own record of what it ran: a test builds its own.
    """
    listing = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, capture_output=True, check=True
    )
    clone = tmp_path / "clone"
    for name in filter(None, listing.stdout.decode().split("\0")):
        if (REPO / name).is_file() and name != "dvc.lock":
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, clone / name)
    tracked_lock = subprocess.run(["git", "show", ":dvc.lock"], cwd=REPO, capture_output=True, check=False)
    if tracked_lock.returncode == 0:
        (clone / "dvc.lock").write_bytes(tracked_lock.stdout)
    _seed_demo_tiny_model(clone)
    for cmd in (
        ["git", "init", "-q"],
        ["git", "add", "-A"],
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c"],
    ):  # a fixed date: clones of the same files have the same commit (one code version, as a work pool requires)
        subprocess.run(cmd, cwd=clone, check=True, env={**os.environ, **_FIXED_DATE})
    return clone


def _seed_demo_tiny_model(clone: Path) -> None:
    """Put the demo matrix's tiny base model (its 300-step warm start takes ~20 s) into the clone's artifacts folder,
    built once per test session in $COREWARDING_TEST_CACHE (set by tests/conftest.py; absent: the clone builds its
    own). The build itself has tests of its own (tests/unit/test_tiny.py); a copy is what a clone would build."""
    cache = os.environ.get(TEST_CACHE_ENV)
    if not cache:
        return
    from corewarding.lm.loading import base_model_source
    from corewarding.pipeline.cells import plan_cell

    plan = plan_cell("demo", "gt_grpo__tiny__tiny", [f"paths.artifacts_dir={cache}"])  # every demo cell: one model
    built = Path(base_model_source(plan.cfg))  # built once; the build lock serialises the test processes
    shutil.copytree(built, clone / "artifacts" / built.name)


def dvc_bin() -> Path:
    return Path(sys.executable).parent / "dvc"


def track_data(clone: Path, *sets: str) -> None:
    """``corewarding data track SETS`` in ``clone``: DVC knows a set's stages once params.yaml lists them."""
    done = subprocess.run([sys.executable, "-m", "corewarding.cli", "data", "track", *sets], cwd=clone,
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]


def run_dvc(clone: Path, *args: str) -> str:
    """``dvc ARGS`` in ``clone`` with this interpreter's tools on PATH; fails the test with its output."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}", "DVC_NO_ANALYTICS": "1"}
    env.pop("COREWARDING_CONFIG_DIR", None)
    done = subprocess.run([str(dvc_bin()), *args], cwd=clone, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done.stdout
