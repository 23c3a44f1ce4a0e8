"""What the pipeline's dry run reads besides the configs: measured step times and the GPU-hour ledger from the results
store (read-only), whether a Hugging Face token is at hand, and the command behind each data stage."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from omegaconf import OmegaConf

from corewarding.results import ledger
from corewarding.results.store.schema import SchemaError
from corewarding.results.store.store import StoreBusyError, StoreDamagedError, reader
from corewarding.training.gpu_hours import devices_of

log = logging.getLogger(__name__)

# dvc.yaml's data stages -> the command each runs (scripts/cw is this checkout's corewarding)
STAGE_COMMANDS = {
    "prepare": "corewarding data prepare {key}",
    "import_rephrased": "corewarding data import-rephrased {key}",
    "rephrase": "corewarding data rephrase {key}",
    "tiny_data": "corewarding data tiny",
}
STAGE_NOTES = {
    "prepare": "a Hub download",
    "import_rephrased": "downloads the paper's released rephrasings from the Hub",
    "rephrase": "Qwen3-32B on vLLM: GPUs",
    "tiny_data": "CPU, seconds; the trainer also makes them",
}


def stage_command(stage: str) -> str:
    """``corewarding ...`` (or ``dvc repro STAGE``) for a data stage, with what it needs.

    >>> print(stage_command("prepare@amc"))
    corewarding data prepare amc  (or: corewarding data track amc && dvc repro prepare@amc; a Hub download)
    """
    name, _, key = stage.partition("@")
    if name not in STAGE_COMMANDS:
        return f"dvc repro {stage}" if stage else "no DVC stage makes it: make it yourself"
    dvc = f"dvc repro {stage}" if name == "tiny_data" else f"corewarding data track {key} && dvc repro {stage}"
    return f"{STAGE_COMMANDS[name].format(key=key)}  (or: {dvc}; {STAGE_NOTES[name]})"


@dataclass(frozen=True)
class Measured:
    """One stored run's measured step time."""

    method: str
    base_model: str
    dataset: str
    backend: str
    device_type: str
    devices: int
    steps: int
    step_seconds: float
    config: dict[str, Any]


def _known(value: Any) -> bool:
    """Not NULL (None, NaN or pandas' NA)."""
    return value is not None and not pd.isna(value)


def _measured(row: dict[str, Any]) -> Measured:
    config = json.loads(row["config"] or "{}")
    held = devices_of(OmegaConf.create(config)) if config.get("backend") else None
    device_type = row["device_type"] if _known(row["device_type"]) else (held.device_type if held else "cpu")
    devices = row["devices"] if _known(row["devices"]) and row["devices"] else (held.count if held else 1)
    return Measured(
        str(row["method"]), str(row["base_model"]), str(row["dataset"]), str(row["backend"] or config.get("backend")),
        str(device_type), int(devices), int(row["steps"]), float(row["step_seconds"]), config,
    )  # fmt: skip


def measured_runs(db: Path, cell_ids: Sequence[str]) -> tuple[list[Measured], str, dict[str, float]]:
    """(the stored runs' step times, where they came from or why there are none, GPU-hours the ledger holds per
    cell). Read-only; a missing, older, busy or damaged store means no measurements, said in the second value."""
    if not db.is_file():
        return [], f"no results store at {db}: every step time is assumed", {}
    try:
        with reader(db, timeout=10.0) as con:
            rows = ledger.step_times(con).to_dict("records")
            hours = ledger.gpu_hours(con, by=("cell",), cell_ids=list(cell_ids)).to_dict("records")
    except (SchemaError, StoreBusyError, StoreDamagedError) as exc:
        return [], f"the results store was not read ({exc}): every step time is assumed", {}
    found = [_measured(r) for r in rows]
    recorded = {str(r["cell"]): float(r["gpu_hours"]) for r in hours if _known(r["gpu_hours"])}
    return found, f"{len(found)} run(s) with measured step times in {db}", recorded


def token_found() -> bool:
    """Whether a Hugging Face token is set (HF_TOKEN) or cached (``hf auth login``); nothing is sent anywhere."""
    from huggingface_hub import get_token  # huggingface_hub: imported when used

    return bool(get_token())
