"""What ``corewarding pipeline run --dry-run`` prints: per cell and in total, the GPUs, GPU-hours, checkpoint disk and
host memory training needs, the data files still missing, and the gated base models that need a Hugging Face token.

Nothing is started or written: the cells' configs are composed, the results store is only read (read-only), the data
files are only looked at. GPU memory, host memory and disk come from the verl memory plan (``training/verl/plan.py``,
the figures ``train ... backend=verl --dry-run`` prints). GPU-hours = training steps x GPU-seconds per step, where the
step time is measured when the store has step times of this cell, else of the same base model and backend (scaled
by the work of a step), else assumed (``configs/cost.yaml``, ``docs/gpu-plan.md``); every cell says which.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from corewarding.config import compose_config
from corewarding.pipeline import audit_plan
from corewarding.pipeline.cells import CellPlan, data_files, paired_stages
from corewarding.pipeline.dry_run_inputs import Measured, measured_runs, stage_command, token_found
from corewarding.pipeline.training_cost import (
    ASSUMED,
    Rates,
    assumed_rates,
    measured_step,
    step_work,
    training_steps,
    validation_rows,
    validations,
)
from corewarding.training.common import cell_of
from corewarding.training.gpu_hours import devices_of
from corewarding.training.verl.attention import SLOW_PACKING, choose_attention
from corewarding.training.verl.plan import plan_cell

GENERATION_AND_COST = "configs/audit.yaml's generation rate, configs/cost.yaml; docs/gpu-plan.md"

log = logging.getLogger(__name__)


@dataclass
class CellCost:
    """One cell's estimate."""

    cell_id: str
    backend: str
    device_type: str
    devices: int
    gpus: int
    steps: int
    steps_source: str
    step_seconds: float  # wall seconds per step on the cell's devices
    step_source: str
    measured: bool  # the step time comes from the store
    device_hours: float
    gpu_hours: float
    gpu_gb: float | None = None  # per GPU, the largest phase (verl only)
    host_gb: float | None = None  # per node
    disk_gb: float | None = None  # the run's checkpoint folder at its largest
    fits: bool | None = None  # within verl.gpu_memory_gb
    recorded_gpu_hours: float | None = None  # what the store's ledger already holds for this cell
    missing: list[str] = field(default_factory=list)
    gated: str | None = None  # the Hub id of a gated base model
    rates: str | None = None  # where an assumed step's generation rate came from
    attention: str | None = None  # the kernel a verl cell trains with (``attention.choose_attention``): "padded sdpa"
    attention_why: str | None = None  # why that kernel (auto's reasoning on this machine, or the config's keys)


@dataclass(frozen=True)
class MissingFile:
    path: str
    stage: str
    command: str
    cells: int


@dataclass(frozen=True)
class DryRun:
    matrix: str
    cells: list[CellCost]
    missing: list[MissingFile]
    gated: dict[str, int]  # gated Hub id -> cells
    token: bool
    store: str  # where the step times came from, or why none


def cell_cost(
    plan: CellPlan, cost: DictConfig, audit: DictConfig, found: Sequence[Measured], seen: dict[str, dict[str, float]]
) -> CellCost:
    """One cell's GPUs, steps, step time, GPU-hours and memory plan (its data and token checks are added later)."""
    cfg = plan.cfg
    backend, devices = str(cfg.backend), devices_of(cfg)
    steps, steps_source = training_steps(plan, cost)
    container = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(container, dict)
    config = {str(k): v for k, v in container.items()}
    verl = backend == "verl"
    attention = choose_attention(cfg.verl) if verl else None  # auto asks this machine whether flash-attn imports
    rates = (
        assumed_rates(cfg, cost, audit, seen, attention) if attention else Rates(1.0, 1.0, "tokens")
    )  # local: tokens
    c = cell_of(cfg)
    measured = measured_step(config, (c.method, c.base_model, c.dataset), backend, devices.device_type, found, rates)
    if measured is not None:
        device_s, source = measured
        total_device_s = steps * device_s  # verl's step time includes its validations; the local one's are small
    elif verl:
        device_s = step_work(config, rates)
        runs = validations(cfg, steps)
        val_s = validation_rows(cfg, audit) * rates.rollout_s_per_token * int(cfg.grpo.max_response_length)
        total_device_s = steps * device_s + runs * val_s
        source = f"assumed: {device_s / devices.count:.0f} s/step + {runs} validations ({GENERATION_AND_COST})"
    else:
        device_s = float(cost.assumed.local_s_per_step)
        total_device_s = steps * device_s
        source = f"{ASSUMED}: {device_s:g} s/step on one {devices.device_type}"
    device_hours = total_device_s / 3600
    out = CellCost(
        plan.cell_id, backend, devices.device_type, devices.count, devices.gpus, steps, steps_source,
        device_s / devices.count, source, measured is not None, device_hours, device_hours if devices.gpus else 0.0,
    )  # fmt: skip
    out.rates = rates.source if verl and measured is None else None
    if attention:
        out.attention, out.attention_why = attention.name, attention.why
    if verl:
        memory = plan_cell(cfg)  # no machine: the limits are the config's (a laptop plans for the cluster)
        out.gpu_gb, out.host_gb, out.disk_gb, out.fits = memory.gpu_gb, memory.host_gb, memory.disk_gb, memory.fits
    return out


def _producer(plan: CellPlan, path: str) -> str:
    """The DVC stage that writes ``path``: the paired stages for the pair files, else the stage of its folder."""
    dataset = plan.cfg.dataset
    if path in (str(dataset.get("original_files")), str(dataset.get("rephrased_files"))) and path != str(
        dataset.train_files
    ):
        stages = paired_stages(dataset)
        if stages:
            return stages[0]
    stages = [str(s) for s in dataset.get("dvc_stages") or []]
    folder = Path(path).parent.name
    return next((s for s in stages if s.split("@")[-1] == folder), stages[0] if stages else "")


def needed_files(plan: CellPlan) -> list[str]:
    """The files the cell trains and validates on, and the prepared set its pairs are imported onto."""
    files = data_files(plan)
    return list(dict.fromkeys([str(plan.cfg.dataset.train_files), *files.values()]))


def missing_files(plans: Sequence[CellPlan], costs: Sequence[CellCost]) -> list[MissingFile]:
    """Every missing data file once, with the stage and command that makes it and how many cells need it."""
    found: dict[str, tuple[str, int]] = {}
    for plan, cost in zip(plans, costs, strict=True):
        for path in needed_files(plan):
            if not Path(path).is_file():
                cost.missing.append(path)
                stage, count = found.get(path, (_producer(plan, path), 0))
                found[path] = (stage, count + 1)
    return [MissingFile(p, s, stage_command(s), n) for p, (s, n) in found.items()]


def gated_model(cfg: DictConfig) -> str | None:
    """The Hub id of the cell's base model when the model is gated (``base_model.gated``) and loaded from the Hub."""
    spec = cfg.base_model
    return str(spec.hf_id) if spec.get("gated") and spec.get("hf_id") and not spec.get("path") else None


def dry_run(plans: Sequence[CellPlan], results_db: Path) -> DryRun:
    """The estimate for the planned cells, reading the results store at ``results_db`` (if there is one)."""
    cost = compose_config([], config_name="cost")
    audit = compose_config([], config_name="audit")
    found, store, recorded = measured_runs(results_db, [p.cell_id for p in plans])
    seen = audit_plan.measured(Path(str(plans[0].cfg.paths.runs_dir)), "vllm")  # earlier audits: tokens/s per model
    costs = [cell_cost(plan, cost, audit, found, seen) for plan in plans]
    missing = missing_files(plans, costs)
    gated: dict[str, int] = {}
    for plan, c in zip(plans, costs, strict=True):
        c.recorded_gpu_hours = recorded.get(plan.cell_id)
        c.gated = gated_model(plan.cfg)
        if c.gated:
            gated[c.gated] = gated.get(c.gated, 0) + 1
    return DryRun(plans[0].matrix.name, costs, missing, gated, token_found() if gated else False, store)


def _gb(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def totals(run: DryRun) -> dict[str, Any]:
    cells = run.cells
    disks = [c.disk_gb for c in cells if c.disk_gb is not None]
    return {
        "cells": len(cells),
        "gpus_per_cell": max((c.gpus for c in cells), default=0),
        "gpu_hours": round(sum(c.gpu_hours for c in cells), 1),
        "device_hours": round(sum(c.device_hours for c in cells), 2),
        "measured_cells": sum(c.measured for c in cells),
        "recorded_gpu_hours": round(sum(c.recorded_gpu_hours or 0.0 for c in cells), 2),
        "max_gpu_gb": max((c.gpu_gb for c in cells if c.gpu_gb is not None), default=None),
        "max_host_gb": max((c.host_gb for c in cells if c.host_gb is not None), default=None),
        "max_disk_gb": max(disks, default=None),
        "all_disk_gb": round(sum(disks), 1) if disks else None,
        "all_fit": all(c.fits is not False for c in cells),
    }


def by_base_model(run: DryRun) -> dict[str, dict[str, Any]]:
    """Cells, GPU-hours and device-hours per base model, with the generation rate its assumed steps used."""
    out: dict[str, dict[str, Any]] = {}
    for c in run.cells:
        model = c.cell_id.split("__")[1]
        row = out.setdefault(model, {"cells": 0, "gpu_hours": 0.0, "device_hours": 0.0, "rates": None})
        row["cells"] += 1
        row["gpu_hours"] += c.gpu_hours
        row["device_hours"] += c.device_hours
        row["rates"] = row["rates"] or c.rates
    return out


def format_dry_run(run: DryRun) -> str:
    """The table, the totals, what is missing and which models are gated."""
    width = max(len("cell"), *(len(c.cell_id) for c in run.cells))
    lines = [
        f"dry run of {len(run.cells)} cell(s) of {run.matrix}: nothing is trained, started or written",
        f"{'cell':<{width}} {'devices':>7} {'GB/GPU':>6} {'host GB':>7} {'disk GB':>7} {'steps':>5} {'s/step':>7} "
        f"{'hours':>7} {'so far':>6}  step time",
    ]
    for c in run.cells:
        lines.append(
            f"{c.cell_id:<{width}} {f'{c.devices} {c.device_type}':>7} {_gb(c.gpu_gb):>6} {_gb(c.host_gb):>7} "
            f"{_gb(c.disk_gb):>7} {c.steps:>5} {c.step_seconds:>7.1f} {c.device_hours:>7.2f} "
            f"{_gb(c.recorded_gpu_hours):>6}  {c.step_source}"
        )
    lines.append(
        "(hours: devices x wall time, GPU-hours on cuda; so far: GPU-hours the store's ledger holds for the cell)"
    )
    t = totals(run)
    lines.append(
        f"total: {t['cells']} cells, {t['gpus_per_cell']} GPUs per cell, about {t['gpu_hours']:,.1f} GPU-hours "
        f"({t['measured_cells']} cells from measured step times, {t['cells'] - t['measured_cells']} assumed; "
        f"{t['recorded_gpu_hours']:,.2f} GPU-hours already recorded in the store)"
    )
    if t["device_hours"] and not t["gpu_hours"]:
        lines.append(f"       {t['device_hours']:.2f} device-hours on CPU (no GPU)")
    if t["max_gpu_gb"] is not None:
        lines.append(
            f"memory and disk (verl memory plan): up to {t['max_gpu_gb']:.1f} GB per GPU "
            f"({'every cell fits' if t['all_fit'] else 'NOT every cell fits'} verl.gpu_memory_gb), "
            f"{t['max_host_gb']:.1f} GB host memory per node, {_gb(t['max_disk_gb'])} GB checkpoint disk per cell, "
            f"{_gb(t['all_disk_gb'])} GB for every cell's kept checkpoints"
        )
    for model, row in sorted(by_base_model(run).items()):
        hours = (
            f"{row['gpu_hours']:>9,.1f} GPU-hours" if row["gpu_hours"] else f"{row['device_hours']:>9,.2f} CPU-hours"
        )
        rates = f"  ({row['rates']})" if row["rates"] else ""
        lines.append(f"  {model:<24} {int(row['cells']):>3} cells {hours}{rates}")
    lines.append(f"step times: {run.store}")
    lines += _attention_lines(run)
    lines += _missing_lines(run) + _gated_lines(run)
    return "\n".join(lines)


def _attention_lines(run: DryRun) -> list[str]:
    """The kernel each verl cell trains with and why (one line per kernel), and a warning for packed dense masks."""
    kernels = Counter((c.attention, c.attention_why) for c in run.cells if c.attention)
    lines = [f"attention: {name} for {n} cells ({why})" for (name, why), n in sorted(kernels.items(), key=str)]
    slow = sum(n for (name, _), n in kernels.items() if name in SLOW_PACKING)
    if slow:
        lines.append(
            f"warning: {slow} cells pack micro-batches into one row through a dense mask (sdpa or eager with "
            "verl.remove_padding=true): 2.4-4.4x slower than flex_attention on an H200 (docs/gpu-plan.md); "
            "verl.remove_padding=auto pads them instead"
        )
    return lines


def _missing_lines(run: DryRun) -> list[str]:
    if not run.missing:
        return ["data: every file the cells train and validate on is here"]
    lines = [f"missing data ({len(run.missing)} file(s); the pipeline's data step makes them, or run):"]
    lines += [f"  {m.path} ({m.cells} cells): {m.command}" for m in run.missing]
    return lines


def _gated_lines(run: DryRun) -> list[str]:
    if not run.gated:
        return []
    token = "a token is set (HF_TOKEN or the cached login)" if run.token else "NO token found: set HF_TOKEN"
    return [
        f"gated base model: {hub_id} ({cells} cells) needs a Hugging Face token whose account accepted its licence "
        f"on the Hub; {token}"
        for hub_id, cells in run.gated.items()
    ]


def as_json(run: DryRun) -> dict[str, Any]:
    return {
        "matrix": run.matrix,
        "cells": [asdict(c) for c in run.cells],
        "total": totals(run),
        "by_base_model": by_base_model(run),
        "missing_data": [asdict(m) for m in run.missing],
        "gated": run.gated,
        "token": run.token,
        "step_times": run.store,
    }
