"""What ``corewarding pipeline run --dry-run`` prints: per cell and in total, the GPUs, GPU-hours of training and of
evaluation, checkpoint disk and host memory, the model cache every machine needs, the wall time on N GPUs, the data
files still missing, and the gated base models that need a Hugging Face token.

Nothing is started or written: the cells' configs are composed, the results store is only read (read-only), the data
files are only looked at. GPU memory, host memory and disk come from the verl memory plan (``training/verl/plan.py``,
the figures ``train ... backend=verl --dry-run`` prints). GPU-hours = training steps x GPU-seconds per step, where the
step time is measured when the store has step times of this cell, else of the same base model and backend (scaled
by the work of a step), else assumed (``configs/cost.yaml``, ``docs/gpu-plan.md``); evaluation = the checkpoints the
evaluate step finds x the audit dry run's GPU-hours per checkpoint (``audit_plan``). Each cell's row names its sources
by a footnote key ([a], [b], ...); each source is said once, below the table.
"""

from __future__ import annotations

import logging
import string
import textwrap
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from corewarding.config import compose_config
from corewarding.evaluation.eval_config import benchmark_configs, expand_benchmarks
from corewarding.pipeline import audit_plan
from corewarding.pipeline.cells import CellPlan, data_files, paired_stages
from corewarding.pipeline.dry_run_inputs import Measured, measured_runs, stage_command, token_found
from corewarding.pipeline.training_cost import (
    ASSUMED,
    COST_CONFIG,
    Rates,
    assumed_rates,
    evaluated_checkpoints,
    measured_step,
    step_work,
    training_steps,
    validation_rows,
    validations,
)
from corewarding.schemas import (
    BaseModelConfig,
    DatasetConfig,
    GenerationConfig,
    GrpoConfig,
    PathsConfig,
    VerlConfig,
    section_of,
)
from corewarding.training.common import cell_of
from corewarding.training.gpu_hours import devices_of
from corewarding.training.verl.attention import SLOW_PACKING, choose_attention
from corewarding.training.verl.plan import DTYPE_BYTES, GB, model_shape, plan_cell

GENERATION_AND_COST = "configs/audit.yaml's generation rate, configs/cost.yaml; docs/gpu-plan.md"
DEFAULT_GPUS = 8  # --gpus: the wall time's GPUs when not given (two 4-GPU machines)
WIDTH = 120  # no printed line is longer
INDENT = "    "  # a wrapped line's continuation

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
    gpu_hours: float  # of training
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
    train_source: str = ""  # the footnote's training part: where the step time came from, without the cell's numbers
    eval_checkpoints: int = 0  # checkpoints the evaluate step finds after training
    eval_samples: int = 0  # samples one checkpoint's evaluation generates
    eval_gpus: int = 0  # GPUs one evaluation uses (vLLM's tensor_parallel_size; 0 on CPU)
    eval_gpu_hours: float | None = 0.0  # None: not estimated (transformers on a GPU)
    eval_source: str = ""  # the footnote's evaluation part

    @property
    def source(self) -> str:
        """The cell's footnote: where its training and evaluation figures came from."""
        return f"{self.train_source}; {self.eval_source}"

    @property
    def wall_hours(self) -> float:
        """Hours the cell holds its devices: training, then evaluating its checkpoints (on the same machine)."""
        train = self.device_hours / self.devices if self.devices else 0.0
        evaluate = (self.eval_gpu_hours or 0.0) / self.eval_gpus if self.eval_gpus else 0.0
        return train + evaluate


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
    models_gb: dict[str, float] = field(default_factory=dict)  # base model -> its weights on disk (GB = 2^30 bytes)
    gpus: int = DEFAULT_GPUS  # the GPUs the wall time is for (--gpus)


def cell_cost(
    plan: CellPlan, cost: DictConfig, audit: DictConfig, found: Sequence[Measured], seen: dict[str, dict[str, float]]
) -> CellCost:
    """One cell's GPUs, steps, step time, GPU-hours and memory plan (its evaluation, data and token checks are added
    later)."""
    cfg = plan.cfg
    backend, devices = str(cfg.backend), devices_of(cfg)
    steps, steps_source = training_steps(plan, cost)
    container = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(container, dict)
    config = {str(k): v for k, v in container.items()}
    verl = backend == "verl"
    # auto asks this machine whether flash-attn imports
    attention = choose_attention(section_of(cfg, VerlConfig)) if verl else None
    rates = (
        assumed_rates(cfg, cost, audit, seen, attention) if attention else Rates(1.0, 1.0, "tokens")
    )  # local: tokens
    c = cell_of(cfg)
    measured = measured_step(config, (c.method, c.base_model, c.dataset), backend, devices.device_type, found, rates)
    if measured is not None:
        device_s, source = measured
        total_device_s = steps * device_s  # verl's step time includes its validations; the local one's are small
        train_source = f"train h: step time {source}"
    elif verl:
        device_s = step_work(config, rates)
        runs = validations(cfg, steps)
        response = section_of(cfg, GrpoConfig).max_response_length
        val_s = validation_rows(cfg, audit) * rates.rollout_s_per_token * response
        total_device_s = steps * device_s + runs * val_s
        source = f"assumed: {device_s / devices.count:.0f} s/step + {runs} validations ({GENERATION_AND_COST})"
        train_source = (
            f"train h: assumed step time, not measured: generation at {rates.generation_source}, scoring and "
            f"training at {COST_CONFIG}'s rates (docs/gpu-plan.md), plus validations (before training, every "
            "schedule.test_freq steps, at the end)"
        )
    else:
        device_s = float(cost.assumed.local_s_per_step)
        total_device_s = steps * device_s
        source = f"{ASSUMED}: {device_s:g} s/step on one {devices.device_type}"
        train_source = f"train h: assumed step time, not measured: {COST_CONFIG}'s assumed.local_s_per_step"
    device_hours = total_device_s / 3600
    out = CellCost(
        plan.cell_id, backend, devices.device_type, devices.count, devices.gpus, steps, steps_source,
        device_s / devices.count, source, measured is not None, device_hours, device_hours if devices.gpus else 0.0,
    )  # fmt: skip
    out.train_source = train_source
    out.rates = rates.source if verl and measured is None else None
    if attention:
        out.attention, out.attention_why = attention.name, attention.why
    if verl:
        memory = plan_cell(cfg)  # no machine: the limits are the config's (a laptop plans for the cluster)
        out.gpu_gb, out.host_gb, out.disk_gb, out.fits = memory.gpu_gb, memory.host_gb, memory.disk_gb, memory.fits
    return out


@dataclass(frozen=True)
class Benchmarks:
    """The benchmark configs a cell's evaluate step runs, composed once per matrix and evaluation overrides."""

    spec: str  # the matrix's evaluation.benchmarks, e.g. "paper"
    names: list[str]
    configs: list[DictConfig]
    samples: int  # one checkpoint's evaluation (``audit_plan.samples_per_checkpoint``)


def benchmarks_of(plan: CellPlan, audit: DictConfig, composed: dict[tuple[str, ...], Benchmarks]) -> Benchmarks:
    """The cell's benchmark configs (as the pipeline's evaluate step composes them), from ``composed`` when a cell
    with the same ones came before."""
    key = (plan.matrix.eval_benchmarks, *plan.evaluation_overrides())
    if key not in composed:
        names = expand_benchmarks(plan.matrix.eval_benchmarks)
        configs = benchmark_configs(names, plan.evaluation_overrides())
        samples = audit_plan.samples_per_checkpoint(configs, audit)
        composed[key] = Benchmarks(plan.matrix.eval_benchmarks, names, configs, samples)
    return composed[key]


def add_evaluation(
    out: CellCost, plan: CellPlan, bench: Benchmarks, audit: DictConfig, seen: dict[str, dict[str, float]]
) -> None:
    """The cell's evaluation: its checkpoints x the audit dry run's GPU-hours per checkpoint (generation only), on
    vLLM; a CPU evaluation holds no GPU, and one with transformers on a GPU is not estimated."""
    generation = section_of(bench.configs[0], GenerationConfig)
    backend, device = generation.backend, (generation.device or "cuda").split(":")[0]
    out.eval_checkpoints = evaluated_checkpoints(plan.cfg, out.steps)
    out.eval_samples = bench.samples
    what = f"{out.eval_checkpoints} checkpoints x {len(bench.names)} benchmarks ({bench.spec})"
    if backend != "vllm" and device != "cuda":
        out.eval_gpus, out.eval_gpu_hours = 0, 0.0
        out.eval_source = f"eval h: {what} on {device} with {backend}, no GPU-hours"
        return
    out.eval_gpus = generation.tensor_parallel_size if backend == "vllm" else 1
    if backend != "vllm":
        out.eval_gpu_hours = None
        out.eval_source = f"eval h: {what} with {backend} on {device}: not estimated (only vLLM's is)"
        return
    params_b = model_shape(plan.cfg).params / 1e9
    name = section_of(plan.cfg, BaseModelConfig).name
    rate = audit_plan.throughput_of(name, audit_plan.max_new_tokens(bench.configs), seen, audit, params_b)
    out.eval_gpu_hours = out.eval_checkpoints * audit_plan.generation_hours(out.eval_samples, rate)
    out.eval_source = (
        f"eval h: {what}, {out.eval_samples:,} samples each, generation only at {audit_plan.generation_phrase(rate)}, "
        "as audit --dry-run"
    )


def _producer(plan: CellPlan, path: str) -> str:
    """The DVC stage that writes ``path``: the paired stages for the pair files, else the stage of its folder."""
    dataset = section_of(plan.cfg, DatasetConfig)
    if path in (dataset.original_files, dataset.rephrased_files) and path != dataset.train_files:
        stages = paired_stages(dataset)
        if stages:
            return stages[0]
    stages = list(dataset.dvc_stages)
    folder = Path(path).parent.name
    return next((s for s in stages if s.split("@")[-1] == folder), stages[0] if stages else "")


def needed_files(plan: CellPlan) -> list[str]:
    """The files the cell trains and validates on, and the prepared set its pairs are imported onto."""
    files = data_files(plan)
    return list(dict.fromkeys([section_of(plan.cfg, DatasetConfig).train_files, *files.values()]))


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
    spec = section_of(cfg, BaseModelConfig)
    return spec.hf_id if spec.gated and spec.hf_id and not spec.path else None


def models_gb(plans: Sequence[CellPlan]) -> dict[str, float]:
    """Each base model's weights on disk (parameters x the bytes of ``base_model.dtype``), in GB of 2^30 bytes: what
    every machine that may run any of the cells keeps in its model cache."""
    out: dict[str, float] = {}
    for plan in plans:
        spec = section_of(plan.cfg, BaseModelConfig)
        if spec.name not in out:
            out[spec.name] = model_shape(plan.cfg).params * DTYPE_BYTES.get(spec.dtype, 2) / GB
    return out


def dry_run(plans: Sequence[CellPlan], results_db: Path, gpus: int = DEFAULT_GPUS, evaluation: bool = True) -> DryRun:
    """The estimate for the planned cells, reading the results store at ``results_db`` (if there is one); the wall
    time is for ``gpus`` GPUs. Without ``evaluation`` the cells' evaluation is not estimated (nor its benchmarks
    composed: a caller that prices training only)."""
    cost = compose_config([], config_name="cost")
    audit = compose_config([], config_name="audit")
    found, store, recorded = measured_runs(results_db, [p.cell_id for p in plans])
    seen = audit_plan.measured(
        Path(section_of(plans[0].cfg, PathsConfig).runs_dir), "vllm"
    )  # earlier audits: tokens/s per model
    costs = [cell_cost(plan, cost, audit, found, seen) for plan in plans]
    composed: dict[tuple[str, ...], Benchmarks] = {}
    for plan, c in zip(plans, costs, strict=True):
        if evaluation:
            add_evaluation(c, plan, benchmarks_of(plan, audit, composed), audit, seen)
        else:
            c.eval_gpu_hours, c.eval_source = None, "eval h: not estimated"
    missing = missing_files(plans, costs)
    gated: dict[str, int] = {}
    for plan, c in zip(plans, costs, strict=True):
        c.recorded_gpu_hours = recorded.get(plan.cell_id)
        c.gated = gated_model(plan.cfg)
        if c.gated:
            gated[c.gated] = gated.get(c.gated, 0) + 1
    token = token_found() if gated else False
    return DryRun(plans[0].matrix.name, costs, missing, gated, token, store, models_gb(plans), gpus)


def greedy_wall_hours(cells: Sequence[tuple[float, int]], gpus: int) -> float | None:
    """Hours until the last cell ends when ``cells`` ((hours, GPUs) each) start in order on ``gpus`` GPUs, each as
    soon as enough GPUs are free, on those free soonest. A cell with no GPU is not scheduled; None when a cell needs
    more GPUs than there are, or none needs one.

    >>> greedy_wall_hours([(5.0, 1), (3.0, 1), (2.0, 1)], 2)  # 5 | 3 then 2
    5.0
    >>> greedy_wall_hours([(1.0, 1), (4.0, 2), (1.0, 1)], 2)  # the 2-GPU cell waits for the first
    6.0
    """
    free = [0.0] * gpus
    scheduled = False
    for hours, need in cells:
        if need == 0:
            continue
        if need > gpus:
            return None
        free.sort()
        start = free[need - 1]  # the need-th GPU to free up
        free[:need] = [start + hours] * need
        scheduled = True
    return max(free) if scheduled else None


def wall_hours(run: DryRun) -> float | None:
    """The wall time of the cells on ``run.gpus`` GPUs, in the matrix's order (the pipeline submits them so)."""
    return greedy_wall_hours([(c.wall_hours, c.gpus) for c in run.cells], run.gpus)


def footnotes(run: DryRun) -> dict[str, str]:
    """Each distinct source of the cells' figures -> its key (a, b, ..., z, aa, ab, ...), in the order rows first
    use it."""
    out: dict[str, str] = {}
    for c in run.cells:
        if c.source not in out:
            out[c.source] = _key(len(out))
    return out


def _key(i: int) -> str:
    letters = string.ascii_lowercase
    return letters[i] if i < len(letters) else _key(i // len(letters) - 1) + letters[i % len(letters)]


def totals(run: DryRun) -> dict[str, Any]:
    """The matrix's totals, rounded as the table prints them."""
    cells = run.cells
    disks = [c.disk_gb for c in cells if c.disk_gb is not None]
    train = round(sum(c.gpu_hours for c in cells), 1)
    evaluate = round(sum(c.eval_gpu_hours or 0.0 for c in cells), 1)
    wall = wall_hours(run)
    return {
        "cells": len(cells),
        "gpus_per_cell": max((c.gpus for c in cells), default=0),
        "gpu_hours": train,  # training
        "eval_gpu_hours": evaluate,
        "eval_not_estimated": sum(c.eval_gpu_hours is None for c in cells),
        "all_gpu_hours": round(train + evaluate, 1),
        "device_hours": round(sum(c.device_hours for c in cells), 2),
        "measured_cells": sum(c.measured for c in cells),
        "recorded_gpu_hours": round(sum(c.recorded_gpu_hours or 0.0 for c in cells), 2),
        "max_gpu_gb": max((c.gpu_gb for c in cells if c.gpu_gb is not None), default=None),
        "max_host_gb": max((c.host_gb for c in cells if c.host_gb is not None), default=None),
        "max_disk_gb": max(disks, default=None),
        "all_disk_gb": round(sum(disks), 1) if disks else None,
        "all_fit": all(c.fits is not False for c in cells),
        "model_cache_gb": round(sum(run.models_gb.values()), 1),
        "base_models": len(run.models_gb),
        "gpus": run.gpus,
        "wall_hours": None if wall is None else round(wall, 1),
    }


def by_base_model(run: DryRun) -> dict[str, dict[str, Any]]:
    """Cells, GPU-hours of training and evaluation and device-hours per base model, with the rates its assumed
    steps used."""
    out: dict[str, dict[str, Any]] = {}
    for c in run.cells:
        model = c.cell_id.split("__")[1]
        row = out.setdefault(
            model, {"cells": 0, "gpu_hours": 0.0, "eval_gpu_hours": 0.0, "device_hours": 0.0, "rates": None}
        )
        row["cells"] += 1
        row["gpu_hours"] += c.gpu_hours
        row["eval_gpu_hours"] += c.eval_gpu_hours or 0.0
        row["device_hours"] += c.device_hours
        row["rates"] = row["rates"] or c.rates
    return out


def _gb(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def wrap(line: str, width: int = WIDTH) -> list[str]:
    """``line`` as lines of at most ``width`` characters, continued under a four-space indent (a word longer than a
    line, e.g. a deep path, is cut)."""
    if len(line) <= width:
        return [line]
    return textwrap.wrap(line, width, subsequent_indent=INDENT, break_on_hyphens=False)


# the columns after the cell id: header, width (each after one space, the key after two)
COLUMNS = (("dev", 5), ("GB/GPU", 6), ("host", 5), ("disk", 6), ("steps", 5), ("s/step", 6), ("train h", 8),
           ("eval h", 7), ("so far", 6))  # fmt: skip
KEY_WIDTH = 4  # "[ab]"


def _row(c: CellCost, key: str) -> list[str]:
    devices = str(c.devices) if c.device_type == "cuda" else f"{c.devices} {c.device_type}"
    evaluate = "-" if c.eval_gpu_hours is None else f"{c.eval_gpu_hours:.2f}"
    return [devices, _gb(c.gpu_gb), _gb(c.host_gb), _gb(c.disk_gb), str(c.steps), f"{c.step_seconds:.1f}",
            f"{c.device_hours:.2f}", evaluate, _gb(c.recorded_gpu_hours), f"[{key}]"]  # fmt: skip


def _table(run: DryRun, keys: dict[str, str]) -> list[str]:
    """The header and one row per cell; a cell id too long to leave the row within WIDTH gets a line of its own."""
    figures = sum(w + 1 for _, w in COLUMNS) + 2 + KEY_WIDTH
    width = min(max(len("cell"), *(len(c.cell_id) for c in run.cells)), WIDTH - figures)

    def line(first: str, values: list[str]) -> str:
        cols = " ".join(f"{v:>{w}}" for v, (_, w) in zip(values, COLUMNS, strict=False))
        return f"{first:<{width}} {cols}  {values[-1]}".rstrip()

    lines = [line("cell", [h for h, _ in COLUMNS] + ["src"])]
    for c in run.cells:
        if len(c.cell_id) > width:
            lines += [c.cell_id, line("", _row(c, keys[c.source]))]
        else:
            lines.append(line(c.cell_id, _row(c, keys[c.source])))
    return lines


def format_dry_run(run: DryRun, default_gpus: bool = False) -> str:
    """The table (each row's sources as a footnote key), the footnotes, the totals, the wall time, the model cache,
    what is missing and which models are gated; no line longer than WIDTH. ``default_gpus``: --gpus was not given."""
    keys = footnotes(run)
    t = totals(run)
    lines = [f"dry run of {len(run.cells)} cell(s) of {run.matrix}: nothing is trained, started or written"]
    lines += _table(run, keys)
    lines += [  # two lines, so that no column's name is cut in two
        "(dev: devices per cell, GPUs unless named; GB/GPU: the largest phase; host: GB per node; disk: GB of "
        "checkpoints;",
        " train h, eval h: device-hours, GPU-hours on cuda; so far: GPU-hours the store's ledger holds; src: the "
        "sources:)",
    ]
    lines += [f"[{key}] {source}" for source, key in keys.items()]
    lines.append(
        f"total: {t['cells']} cells, {t['gpus_per_cell']} GPUs per cell: about {t['gpu_hours']:,.1f} GPU-hours of "
        f"training + {t['eval_gpu_hours']:,.1f} of evaluation = {t['all_gpu_hours']:,.1f} GPU-hours "
        f"({t['measured_cells']} cells from measured step times, {t['cells'] - t['measured_cells']} assumed; "
        f"{t['recorded_gpu_hours']:,.2f} GPU-hours already recorded in the store)"
    )
    if t["eval_not_estimated"]:
        lines.append(f"       evaluation not estimated for {t['eval_not_estimated']} cells (not counted)")
    if t["device_hours"] and not t["gpu_hours"]:
        lines.append(f"       {t['device_hours']:.2f} device-hours on CPU (no GPU)")
    lines.append(_wall_line(run, t, default_gpus))
    lines.append(
        f"model cache per machine: {t['model_cache_gb']:,.1f} GB for the {t['base_models']} base model(s) "
        f"(parameters x the bytes of base_model.dtype; the Hugging Face cache, or base_model.path), on every machine "
        f"that may run a cell"
    )
    if t["max_gpu_gb"] is not None:
        lines.append(
            f"memory and disk (verl memory plan): up to {t['max_gpu_gb']:.1f} GB per GPU "
            f"({'every cell fits' if t['all_fit'] else 'NOT every cell fits'} verl.gpu_memory_gb), "
            f"{t['max_host_gb']:.1f} GB host memory per node, {_gb(t['max_disk_gb'])} GB checkpoint disk per cell, "
            f"{_gb(t['all_disk_gb'])} GB for every cell's kept checkpoints"
        )
    models = by_base_model(run)
    lines.append("per base model: cells, GPU-hours of training + evaluation, the rates of its assumed step times")
    width = max(len(m) for m in models)
    for model, row in sorted(models.items()):
        if row["gpu_hours"]:
            hours = f"{row['gpu_hours']:>9,.1f} + {row['eval_gpu_hours']:>6,.1f}"
        else:
            hours = f"{row['device_hours']:>9,.2f} CPU-hours"
        rates = f"  {_short_rates(row['rates'])}" if row["rates"] else ""
        lines.append(f"  {model:<{width}} {int(row['cells']):>3} cells {hours}{rates}")
    lines.append(f"step times: {run.store}")
    lines += _attention_lines(run)
    lines += _missing_lines(run) + _gated_lines(run)
    return "\n".join(out for line in lines for out in wrap(line))


def _short_rates(rates: str) -> str:
    """A model's rates without their source (the cells' footnotes say it): ``generation N tokens/s per GPU;
    attention <kernel> xF``."""
    generation, _, attention = rates.partition("; attention ")
    return f"{generation.split(': ')[0]}; attention {attention}" if attention else generation


def _wall_line(run: DryRun, t: dict[str, Any], default_gpus: bool) -> str:
    gpus = f"{run.gpus} GPUs (--gpus {run.gpus}{', the default' if default_gpus else ''})"
    needs = sorted({c.gpus for c in run.cells if c.gpus})
    if not needs:
        return f"wall time on {gpus}: none of the cells trains on a GPU"
    if t["wall_hours"] is None:
        return f"wall time on {gpus}: a cell needs {needs[-1]} GPUs, more than that (--gpus {needs[-1]} or more)"
    per_cell = f"{needs[0]}" if len(needs) == 1 else f"{needs[0]}-{needs[-1]}"
    return (
        f"wall time on {gpus}: about {t['wall_hours']:,.1f} h ({t['wall_hours'] / 24:,.1f} days): each cell holds its "
        f"{per_cell} GPUs to train, then evaluate; the cells start in the matrix's order as GPUs free up"
    )


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
    """The plan as one JSON document: the table's figures per cell, the same totals, the footnotes by key."""
    keys = footnotes(run)
    cells = [
        {**asdict(c), "footnote": keys[c.source], "wall_hours": c.wall_hours,
         "all_gpu_hours": None if c.eval_gpu_hours is None else c.gpu_hours + c.eval_gpu_hours}
        for c in run.cells
    ]  # fmt: skip
    return {
        "matrix": run.matrix,
        "cells": cells,
        "footnotes": {key: source for source, key in keys.items()},
        "total": totals(run),
        "models_gb": run.models_gb,
        "by_base_model": by_base_model(run),
        "missing_data": [asdict(m) for m in run.missing],
        "gated": run.gated,
        "token": run.token,
        "step_times": run.store,
    }
