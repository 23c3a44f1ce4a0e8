"""Read one run folder: its identity, status and per-step metrics (``config.yaml``, ``run.json``, ``metrics.jsonl``).

A run folder's ``run.json`` (written by the trainer) gives status, start, end, code version and data hashes; a
folder without one (older runs) gets them inferred: finished when its newest checkpoint is the last step, else
``incomplete``; the start is the time ``config.yaml`` was written. Finding run folders and reading their files is
``run_folders``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd

from corewarding.matrix import PLAIN_NAME_RULE, Cell, cell_from_config, hub_repo_id, is_plain_name
from corewarding.results.ingest.run_folders import (
    RunFolderError,
    file_time,
    latest_state,
    parse_time,
    published,
    run_config,
    run_record,
)
from corewarding.run_folder import CONFIG, METRICS, RUN_RECORD

log = logging.getLogger(__name__)


RUN_COLUMNS = (
    "run_id",
    "cell_id",
    "method",
    "base_model",
    "dataset",
    "backend",
    "hub_repo_id",
    "config_hash",
    "code_version",
    "data_hashes",
    "status",
    "started_at",
    "ended_at",
    "run_dir",
    "total_steps",
    "last_step",
    "max_response_length",
    "error",
    "published_step",
    "published_commit",
    "config",
    "device_type",
    "devices",
    "wall_seconds",
    "device_hours",
    "gpu_hours",
)  # the order of RunInfo.row()


@dataclass
class RunInfo:
    """One row of the ``runs`` table."""

    run_id: str
    cell: Cell
    run_dir: Path
    backend: str | None
    hub_repo_id: str | None
    config_hash: str | None
    code_version: str | None
    data_hashes: dict[str, Any] = field(default_factory=dict)
    status: str = "unknown"
    started_at: datetime | None = None
    ended_at: datetime | None = None
    total_steps: int | None = None
    last_step: int | None = None
    max_response_length: int | None = None
    error: str | None = None
    published_step: int | None = None  # the newest step a push to the Hub is recorded for (None: not published)
    published_commit: str | None = None
    config: dict[str, Any] = field(default_factory=dict)  # the run's config.yaml
    from_record: bool = False  # the start time comes from run.json (not a file time)
    compute: dict[str, Any] = field(default_factory=dict)  # run.json's GPU-hour ledger ({} for older runs)

    @property
    def identity(self) -> tuple[str, str, str] | None:
        """What names one training run wherever its folder is copied: cell, ``run.json`` start, config hash.

        None when the folder has no ``run.json`` start (its start is then a file time, which a copy changes).
        """
        if not self.from_record or self.started_at is None:
            return None
        return self.cell.cell_id, self.started_at.isoformat(), self.config_hash or ""

    def row(self) -> list[Any]:
        """Values in the column order of ``runs``."""
        c = self.cell
        return [
            self.run_id,
            c.cell_id,
            c.method,
            c.base_model,
            c.dataset,
            self.backend,
            self.hub_repo_id,
            self.config_hash,
            self.code_version,
            json.dumps(self.data_hashes, sort_keys=True),
            self.status,
            self.started_at,
            self.ended_at,
            str(self.run_dir),
            self.total_steps,
            self.last_step,
            self.max_response_length,
            self.error,
            self.published_step,
            self.published_commit,
            json.dumps(self.config, sort_keys=True, default=str),
            self.compute.get("device_type"),
            self.compute.get("devices"),
            self.compute.get("wall_seconds"),
            self.compute.get("device_hours"),
            self.compute.get("gpu_hours"),
        ]

    def phase_rows(self) -> list[tuple[str, str, float, float, float]]:
        """``run_phase_hours`` rows: (run_id, phase, seconds, device-hours, GPU-hours) of each verl phase."""
        gpu = bool(self.compute.get("gpus"))
        rows = []
        for phase, figures in sorted((self.compute.get("phases") or {}).items()):
            device_hours = float(figures.get("device_hours") or 0.0)
            rows.append((self.run_id, str(phase), float(figures.get("seconds") or 0.0), device_hours,
                         device_hours if gpu else 0.0))  # fmt: skip
        return rows


def run_id_of(cell: Cell, run_dir: Path) -> str:
    """``<cell_id>@<8 hex of the folder's absolute path>``: stable for a folder, distinct for two folders of a cell."""
    return f"{cell.cell_id}@{hashlib.sha256(str(run_dir.resolve()).encode()).hexdigest()[:8]}"


def read_run_info(run_dir: Path) -> RunInfo:
    """Identity, status and provenance of the run in ``run_dir``."""
    cfg = run_config(run_dir)
    try:
        cell = cell_from_config(cfg)
    except ValueError as exc:  # a seed_index that is no seed: named with the file
        raise RunFolderError(f"{run_dir / CONFIG}: {exc}") from None
    if not is_plain_name(cell.cell_id):  # the matrix's rule: no bidi control, invisible or look-alike character
        raise RunFolderError(f"{run_dir}: cell id {cell.cell_id!r} (from {CONFIG}) is not a plain name "
                             f"({PLAIN_NAME_RULE}); nothing of this run folder is ingested")  # fmt: skip
    record, state = run_record(run_dir), latest_state(run_dir)
    try:
        hub: str | None = hub_repo_id(cell, str((cfg.get("hub") or {}).get("org") or "TMLR-Group-HF"))
    except (KeyError, FileNotFoundError):
        hub = None
    total = state.get("total_steps") or (cfg.get("schedule") or {}).get("total_steps")
    last = state.get("step")
    status = record.get("status") or ("finished" if last is not None and last == total else "incomplete")
    started = parse_time(record.get("started_at"), run_dir / RUN_RECORD, "started_at") or file_time(run_dir / CONFIG)
    ended = parse_time(record.get("ended_at"), run_dir / RUN_RECORD, "ended_at")
    if ended is None and not record and status == "finished" and (run_dir / METRICS).is_file():
        ended = file_time(run_dir / METRICS)
    published_step, commit = published(run_dir, hub)
    return RunInfo(
        run_id=run_id_of(cell, run_dir),
        cell=cell,
        run_dir=run_dir.resolve(),
        backend=str(record.get("backend") or cfg.get("backend") or "") or None,
        hub_repo_id=hub,
        config_hash=record.get("config_hash") or state.get("config_hash"),
        code_version=record.get("code_version"),
        data_hashes=record.get("data_files") or {},
        status=str(status),
        started_at=started,
        ended_at=ended,
        total_steps=int(total) if total is not None else None,
        last_step=int(last) if last is not None else None,
        max_response_length=(cfg.get("grpo") or {}).get("max_response_length"),
        error=record.get("error"),
        published_step=published_step,
        published_commit=commit,
        config=cfg,
        from_record=bool(record.get("started_at")),
        compute=_compute(record, run_dir / RUN_RECORD),
    )


LEDGER_NUMBERS = ("devices", "gpus", "wall_seconds", "device_hours", "gpu_hours")


def _compute(record: dict[str, Any], source: Path) -> dict[str, Any]:
    """run.json's ``compute`` ledger, its figures checked (a wrong type is an error naming the key)."""
    compute = record.get("compute")
    if compute is None:
        return {}
    if not isinstance(compute, dict):
        raise RunFolderError(f"{source}: compute is not a JSON object")
    for key in LEDGER_NUMBERS:
        value = compute.get(key)
        if value is not None and _number(value, str(source), f"compute.{key}") is not None and float(value) < 0:
            raise RunFolderError(f"{source}: compute.{key}={value!r} is negative")
    phases = compute.get("phases") or {}
    if not isinstance(phases, dict) or not all(isinstance(v, dict) for v in phases.values()):
        raise RunFolderError(f"{source}: compute.phases is not an object of objects")
    for phase, figures in phases.items():
        for key in ("seconds", "device_hours"):
            _number(figures.get(key), str(source), f"compute.phases.{phase}.{key}")
    return compute


def _number(value: Any, where: str, key: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool | int | float):
        number = float(value)
        if not math.isfinite(number):  # NaN, ±Infinity, or a literal too large for a float (1e999)
            text = json.dumps(value)  # as the file spells it: NaN, Infinity, -Infinity
            raise RunFolderError(f"{where}: {key}={text} is not a finite number (log null for a missing value)")
        return number
    raise RunFolderError(f"{where}: {key}={value!r} is not a number")


def read_metrics(path: Path, allow_partial_tail: bool) -> pd.DataFrame:
    """``metrics.jsonl`` as long rows (step, metric, value); null values are not logged values and are left out.

    An unterminated last line of a running run (being appended) is skipped; anywhere else a bad line is an error.
    """
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    rows: list[tuple[int, str, float | None]] = []
    seen: set[int] = set()
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as exc:
            if lineno == len(lines) and allow_partial_tail:
                log.warning("%s: skipped an unfinished last line (the run is still writing it)", where)
                continue
            raise RunFolderError(f"{where}: not JSON ({exc})") from exc
        if not isinstance(entry, dict) or not isinstance(entry.get("step"), int) or isinstance(entry["step"], bool):
            raise RunFolderError(f"{where}: not an object with an integer 'step'")
        step = entry["step"]
        if step in seen:
            raise RunFolderError(f"{where}: step {step} appears twice")
        seen.add(step)
        for key, value in entry.items():
            number = _number(value, where, key)
            if key != "step" and number is not None:
                rows.append((step, key, number))
    return pd.DataFrame(rows, columns=["step", "metric", "value"])
