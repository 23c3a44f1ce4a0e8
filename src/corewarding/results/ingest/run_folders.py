"""Find run folders and read their files: ``config.yaml``, ``run.json``, the newest checkpoint's trainer state and the
publish folders' push records. Every unreadable file is a ``RunFolderError`` naming it."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from corewarding.run_folder import (
    CHECKPOINTS,
    CONFIG,
    EVAL_METRICS,
    LATEST,
    METRICS,
    PUBLISH,
    PUSH_RECORD,
    RUN_RECORD,
    STEP_PREFIX,
    checkpoints_dir,
)
from corewarding.yaml_bounds import read_yaml

log = logging.getLogger(__name__)


class RunFolderError(ValueError):
    """A run folder that cannot be ingested; the message names the file (and line or key)."""


def is_run_dir(path: Path) -> bool:
    """Whether ``path`` holds a run: config.yaml and metrics.jsonl or eval/metrics.parquet."""
    return (path / CONFIG).is_file() and ((path / METRICS).is_file() or (path / EVAL_METRICS).is_file())


def find_run_dirs(root: Path) -> list[Path]:
    """Every run folder at or under ``root`` (a folder with config.yaml and metrics.jsonl or eval/metrics.parquet),
    except under hidden folders (runs moved aside to ``runs/.superseded/``), ``checkpoints/`` and ``publish/``
    (copies made for the Hub), and folders inside another run folder (a copy of a run is not a second run)."""
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: no such folder")
    found = sorted(
        {
            p.parent
            for p in root.rglob(CONFIG)
            if is_run_dir(p.parent)
            and not {CHECKPOINTS, PUBLISH} & set(p.relative_to(root).parts)
            and not any(part.startswith(".") for part in p.relative_to(root).parts)  # runs/.superseded/ etc.
        }
    )
    outer: list[Path] = []
    for path in found:  # sorted: a run folder comes before the folders inside it
        if any(path.is_relative_to(o) for o in outer):
            log.info("%s: inside run folder %s, not a run of its own: skipped", path, outer[-1])
            continue
        outer.append(path)
    return outer


def parse_time(value: Any, source: Path, key: str) -> datetime | None:
    """``value`` as a naive UTC time (None when absent); not ISO 8601 is a RunFolderError naming ``key``."""
    if value in (None, ""):
        return None
    try:
        stamp = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError as exc:
        raise RunFolderError(f"{source}: {key}={value!r} is not an ISO 8601 time") from exc
    return stamp.astimezone(UTC).replace(tzinfo=None) if stamp.tzinfo else stamp


def file_time(path: Path) -> datetime:
    """The file's modification time, naive UTC."""
    return datetime.fromtimestamp(path.stat().st_mtime, UTC).replace(tzinfo=None)


def latest_state(run_dir: Path) -> dict[str, Any]:
    """The trainer state of the run's newest checkpoint (``{}`` without one)."""
    pointer = checkpoints_dir(run_dir) / LATEST
    if not pointer.is_file():
        return {}
    state = checkpoints_dir(run_dir) / pointer.read_text().strip() / "trainer_state.json"
    try:
        loaded = json.loads(state.read_text()) if state.is_file() else {}
    except json.JSONDecodeError as exc:
        raise RunFolderError(f"{state}: not JSON ({exc})") from exc
    if not isinstance(loaded, dict):
        raise RunFolderError(f"{state}: not a JSON object")
    return loaded


def run_config(run_dir: Path) -> dict[str, Any]:
    """The run's config.yaml as a dict; it must name method, base_model and dataset."""
    path = run_dir / CONFIG
    raw = read_yaml(path, RunFolderError)  # bounded: an alias bomb or a huge file is refused in one line
    try:
        raw = OmegaConf.to_container(OmegaConf.create(raw)) if isinstance(raw, dict) else raw
    except OmegaConfBaseException as exc:  # e.g. a key OmegaConf does not take
        raise RunFolderError(f"{path}: cannot read ({exc})") from exc
    if not isinstance(raw, dict):
        raise RunFolderError(f"{path}: not a mapping")
    for key in ("method", "base_model", "dataset"):
        if not isinstance(raw.get(key), dict) or not raw[key].get("name"):
            raise RunFolderError(f"{path}: missing {key}.name")
    return {str(k): v for k, v in raw.items()}


def run_record(run_dir: Path) -> dict[str, Any]:
    """The run's run.json (``{}`` for an older run without one)."""
    path = run_dir / RUN_RECORD
    if not path.is_file():
        return {}
    try:
        record = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise RunFolderError(f"{path}: not JSON ({exc})") from exc
    if not isinstance(record, dict):
        raise RunFolderError(f"{path}: not a JSON object")
    return record


def published(run_dir: Path, repo_id: str | None) -> tuple[int | None, str | None]:
    """(step, commit) of the newest step whose publish folder records a push to ``repo_id`` (main preferred)."""
    best: tuple[int | None, str | None] = (None, None)
    for marker in sorted((run_dir / PUBLISH).glob(f"{STEP_PREFIX}*/{PUSH_RECORD}")):
        try:
            step = int(marker.parent.name.removeprefix(STEP_PREFIX))
            pushes = json.loads(marker.read_text()).get("pushes") or []
        except (ValueError, AttributeError, OSError) as exc:
            log.warning("%s: unreadable push record, not counted as published (%s)", marker, exc)
            continue
        mine = [p for p in pushes if isinstance(p, dict) and p.get("repo_id") == repo_id and p.get("commit")]
        mine.sort(key=lambda p: p.get("revision") != "main")
        if mine and (best[0] is None or step > best[0]):
            best = (step, str(mine[0]["commit"]))
    return best
