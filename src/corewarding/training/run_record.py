"""``run.json``: what a run folder holds, for the results store: status, start and end, code version, the CPU (its
model, vector flags and the torch kernels asked for), data hashes.

Written atomically at start (status ``running``), at the end (``finished``), on Ctrl-C (``interrupted``: stopped on
purpose, resumable) and on any other exception (``failed``, with the error). A resumed run keeps its first start
time and adds the resume time to ``resumed_at``.

``compute`` is the run's GPU-hour ledger (``gpu_hours.py``): the devices it holds, one session per launch (start,
end, wall seconds, how it ended), their totals in device-hours and GPU-hours, and verl's phases. A resume of the same
configuration keeps the earlier sessions; a session cut off without ``record_end`` (the machine died) is not counted.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import time
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from corewarding import CHECKOUT
from corewarding.cpu import cpu_record
from corewarding.files import file_sha256
from corewarding.run_folder import RUN_RECORD
from corewarding.schemas import DatasetConfig, section_of
from corewarding.training.common import legacy_training_config_hash
from corewarding.training.gpu_hours import Devices, devices_of, ledger, phase_seconds

log = logging.getLogger(__name__)

# Files the pipeline itself rewrites (DVC's record of stages, the cell list): changes there are not code changes.
BOOKKEEPING = (":!dvc.lock", ":!params.yaml")


def utc_now() -> str:
    """ISO 8601 UTC with a ``Z`` suffix, to the second."""
    return datetime.now(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def code_version() -> str:
    """``<package version>+g<git sha>[.dirty]`` when the package runs from a git checkout, else the version."""
    try:
        version = metadata.version("corewarding")
    except metadata.PackageNotFoundError:
        version = "unknown"
    try:
        git = ["git", "-C", str(CHECKOUT)]
        sha = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=True)
        dirty = subprocess.run(
            [*git, "status", "--porcelain", "--untracked-files=no", "--", ".", *BOOKKEEPING],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return version
    return f"{version}+g{sha.stdout.strip()[:12]}" + (".dirty" if dirty.stdout.strip() else "")


def data_files(cfg: DictConfig) -> dict[str, dict[str, str]]:
    """The dataset files of ``cfg`` that exist, with their SHA-256."""
    found, dataset = {}, section_of(cfg, DatasetConfig)
    for role in ("train", "rephrased", "val"):
        value = getattr(dataset, f"{role}_files")
        if Path(value).is_file():
            found[role] = {"path": value, "sha256": file_sha256(Path(value))}
    return found


def _write(run_dir: Path, record: dict[str, Any]) -> None:
    tmp = run_dir / f".{RUN_RECORD}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(record, indent=2) + "\n")
    tmp.replace(run_dir / RUN_RECORD)


def read_record(run_dir: Path) -> dict[str, Any] | None:
    path = run_dir / RUN_RECORD
    return json.loads(path.read_text()) if path.is_file() else None


def record_start(run_dir: Path, cfg: DictConfig, config_hash: str, cell_id: str) -> dict[str, Any]:
    """Mark the run ``running``; a resume of the same configuration keeps the first start time (a record of the
    previous version, whose hash held where ``paths.*`` point, counts as the same for one version)."""
    now = utc_now()
    previous = read_record(run_dir)
    resumed = previous is not None and previous.get("config_hash") in (config_hash, legacy_training_config_hash(cfg))
    devices = devices_of(cfg)
    sessions = list(((previous or {}).get("compute") or {}).get("sessions") or []) if resumed else []
    compute = {**ledger(sessions, devices, {}), "session_started": time.time(), "session_started_at": now}
    record = {
        "cell_id": cell_id,
        "backend": str(cfg.backend),
        "status": "running",
        "started_at": previous["started_at"] if resumed and previous else now,
        "resumed_at": [*(previous or {}).get("resumed_at", []), now] if resumed else [],
        "ended_at": None,
        "code_version": code_version(),
        "cpu": cpu_record(),  # CPU results (the tiny runs, the demo's table) vary with torch's kernels
        "config_hash": config_hash,
        "data_files": data_files(cfg),
        "error": None,
        "compute": compute,
    }
    _write(run_dir, record)
    return record


def record_end(run_dir: Path, status: str, error: BaseException | None = None) -> None:
    """Mark the run ``finished``, ``interrupted`` or ``failed`` (with the error's type and message), and close its
    session in the GPU-hour ledger."""
    record = read_record(run_dir) or {}
    now = utc_now()
    record.update(
        status=status, ended_at=now, error=None if error is None else f"{type(error).__name__}: {error}"[:2000]
    )
    compute = record.get("compute")
    if isinstance(compute, dict):
        record["compute"] = close_session(run_dir, compute, status, now)
    _write(run_dir, record)


def close_session(run_dir: Path, compute: dict[str, Any], status: str, now: str) -> dict[str, Any]:
    """The ledger with the open session (started by ``record_start``) closed at ``now`` and the totals redone."""
    sessions = list(compute.get("sessions") or [])
    started = compute.get("session_started")
    if isinstance(started, int | float):
        sessions.append(
            {
                "started_at": compute.get("session_started_at"),
                "ended_at": now,
                "seconds": round(max(0.0, time.time() - float(started)), 3),
                "status": status,
            }
        )
    devices = Devices(str(compute.get("device_type") or "cpu"), int(compute.get("devices") or 1))
    return ledger(sessions, devices, phase_seconds(run_dir))
