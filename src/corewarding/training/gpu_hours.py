"""The GPU-hour ledger of one run: which devices it held, for how long, and (verl) how that time split into phases.

A run's cost is devices x wall time: the local backend holds one device (``device``: cpu, cuda, mps), verl holds
``nnodes x n_gpus_per_node`` (GPUs with ``verl.platform=cuda``, CPU ranks with ``verl.platform=cpu``). Only CUDA
devices count as GPU-hours; the others are device-hours of their type. Each launch of a run (a resume is a new
launch) is one session; the run record (``run.json``, ``run_record.py``) keeps them all, so a resumed run adds up.
verl logs each step's phases (``timing_s/gen``, ``timing_s/update_actor``, ...) in ``verl_logs/``: every attempt's
records are summed, redone steps included, because they held the devices too.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from corewarding.run_folder import VERL_LOGS
from corewarding.training.verl.metrics import ATTEMPT_GLOB, read_attempt

log = logging.getLogger(__name__)

PHASE_PREFIX = "timing_s/"
WHOLE_STEP = "step"  # verl's timing_s/step spans the others: not a phase of its own


@dataclass(frozen=True)
class Devices:
    """What a run holds while it trains."""

    device_type: str  # cuda, cpu, mps, ...
    count: int

    @property
    def gpus(self) -> int:
        return self.count if self.device_type == "cuda" else 0


def devices_of(cfg: DictConfig) -> Devices:
    """The devices ``cfg``'s run holds: verl's GPUs (or CPU ranks), else the local backend's one device.

    >>> from omegaconf import OmegaConf
    >>> devices_of(OmegaConf.create({"backend": "local", "device": "cuda:1"}))
    Devices(device_type='cuda', count=1)
    >>> verl = {"platform": "cuda", "nnodes": 2, "n_gpus_per_node": 4}
    >>> devices_of(OmegaConf.create({"backend": "verl", "verl": verl})).gpus
    8
    """
    if str(cfg.backend) == "verl":
        platform = str(cfg.verl.get("platform", "cuda"))  # raw read: a stored run's config may predate the key
        return Devices("cpu" if platform == "cpu" else "cuda", int(cfg.verl.nnodes) * int(cfg.verl.n_gpus_per_node))
    return Devices(str(cfg.get("device", "cpu")).split(":")[0], 1)  # raw read: a stored run's config, as above


def phase_seconds(run_dir: Path) -> dict[str, float]:
    """verl's per-phase seconds summed over every step record of every attempt in ``run_dir``; {} without logs."""
    totals: dict[str, float] = {}
    for path in sorted((Path(run_dir) / VERL_LOGS).glob(ATTEMPT_GLOB)):
        try:
            records = read_attempt(path)
        except (ValueError, KeyError, TypeError, OSError) as exc:  # a damaged log costs the phases, not the run
            log.warning("%s: phases not counted (%s)", path, exc)
            continue
        for _, data in records:
            for key, value in data.items():
                phase = key.removeprefix(PHASE_PREFIX)
                if key.startswith(PHASE_PREFIX) and phase != WHOLE_STEP and isinstance(value, int | float):
                    totals[phase] = totals.get(phase, 0.0) + float(value)
    return dict(sorted(totals.items()))


def hours(seconds: float, devices: Devices) -> tuple[float, float]:
    """(device-hours, GPU-hours) of holding ``devices`` for ``seconds``."""
    device_hours = devices.count * seconds / 3600
    return device_hours, device_hours if devices.gpus else 0.0


def ledger(sessions: list[dict[str, Any]], devices: Devices, phases: dict[str, float]) -> dict[str, Any]:
    """The ``compute`` entry of a run record: its sessions, their totals and the phases in device-hours."""
    wall = sum(float(s.get("seconds") or 0.0) for s in sessions)
    device_hours, gpu_hours = hours(wall, devices)
    return {
        "device_type": devices.device_type,
        "devices": devices.count,
        "gpus": devices.gpus,
        "sessions": sessions,
        "wall_seconds": round(wall, 3),
        "device_hours": round(device_hours, 6),
        "gpu_hours": round(gpu_hours, 6),
        "phases": {
            name: {"seconds": round(s, 3), "device_hours": round(hours(s, devices)[0], 6)} for name, s in phases.items()
        },
    }
