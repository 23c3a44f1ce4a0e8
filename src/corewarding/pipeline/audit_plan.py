"""What ``corewarding audit --dry-run`` prints: evaluations, generated samples and an estimate of GPU time.

Problems per benchmark come from the prepared file when it is here, else from ``configs/audit.yaml``. Throughput
(output tokens per second, and tokens per sample) comes from this checkout's earlier audits of the same base model
with the same backend (``runs/*/released/audit.json``), else from the assumption in ``configs/audit.yaml``; every
line says which.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from corewarding.config import compose_config, load_group_option
from corewarding.matrix import Cell
from corewarding.results.ingest.released import AuditRecordError, find_released, read_record
from corewarding.rows import read_verl_rows
from corewarding.schemas import BenchmarkConfig, section_of

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Throughput:
    tokens_per_s: float
    tokens_per_sample: float
    source: str  # "measured: N samples in earlier audits" or "assumed (configs/audit.yaml)"
    measured: bool = False


@dataclass(frozen=True)
class AuditEstimate:
    """The dry run's figures for one base model's cells."""

    base_model: str
    cells: int
    evaluations: int
    samples: int
    gpu_hours: float
    throughput: Throughput


def rows_in(path: Path) -> int:
    """The rows of a prepared file (parquet: from its footer, without reading the rows)."""
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq  # pyarrow: imported when used

        return int(pq.ParquetFile(path).metadata.num_rows)
    return len(read_verl_rows(path))


def problems_of(cfg: DictConfig, audit_cfg: DictConfig) -> int:
    """Problems the benchmark evaluates: the prepared file's rows (up to ``limit``), else the configured count."""
    spec = section_of(cfg, BenchmarkConfig)
    path = Path(spec.data_file or "")  # external benchmarks: their tool holds the data
    count = rows_in(path) if spec.data_file and path.is_file() else audit_cfg.problems.get(spec.name)
    if count is None:
        raise KeyError(f"configs/audit.yaml: problems.{spec.name} is missing and {path} is not prepared here")
    return min(int(count), spec.limit) if spec.limit is not None else int(count)


def measured(runs_dir: Path, backend: str) -> dict[str, dict[str, float]]:
    """Per base model: samples, tokens and generation seconds summed over earlier audits with ``backend``."""
    totals: dict[str, dict[str, float]] = {}
    for folder in find_released(runs_dir) if runs_dir.is_dir() else []:
        try:
            record = read_record(folder)
        except AuditRecordError as exc:
            log.warning("%s (not used for the estimate)", exc)
            continue
        seen = record.throughput or {}
        if seen.get("backend") != backend or not seen.get("seconds"):
            continue
        total = totals.setdefault(record.base_model, {"samples": 0.0, "tokens": 0.0, "seconds": 0.0})
        for key in total:
            total[key] += float(seen.get(key) or 0)
    return totals


def throughput_of(
    base_model: str, max_new_tokens: int, seen: dict[str, dict[str, float]], audit_cfg: DictConfig,
    params_b: float | None = None,
) -> Throughput:  # fmt: skip
    """The measured throughput of ``base_model`` when earlier audits measured it, else the assumption (for
    ``params_b`` billion parameters; by default ``configs/base_model/<base_model>.yaml``'s shape)."""
    if base_model in seen and seen[base_model]["tokens"] > 0:
        m = seen[base_model]
        return Throughput(m["tokens"] / m["seconds"], m["tokens"] / m["samples"],
                          f"measured: {int(m['samples'])} samples of earlier audits of {base_model}", True)  # fmt: skip
    if params_b is None:
        params_b = float(load_group_option("base_model", base_model).base_model.shape.params_b)
    assumed = audit_cfg.assumed
    return Throughput(
        float(assumed.tokens_per_s_times_params_b) / params_b,
        float(assumed.response_fraction) * max_new_tokens,
        "assumed, not measured (configs/audit.yaml; audit one cell on your GPU to measure it)",
    )


def samples_per_checkpoint(configs: list[DictConfig], audit_cfg: DictConfig) -> int:
    """Samples one checkpoint's evaluation generates: per benchmark its problems x n (one when greedy)."""
    total = 0
    for cfg in configs:
        spec = section_of(cfg, BenchmarkConfig)
        n = 1 if spec.temperature == 0 else spec.n
        total += problems_of(cfg, audit_cfg) * n
    return total


def max_new_tokens(configs: list[DictConfig]) -> int:
    """The largest response budget of the benchmarks (a sample's tokens are a fraction of it when assumed)."""
    return max(int(c.benchmark.max_new_tokens) for c in configs)


def generation_phrase(rate: Throughput) -> str:
    """Which generation rate: the assumption, said without the model's own figure (a footnote many models' cells
    share), or the earlier audits that measured it.

    >>> generation_phrase(Throughput(100.0, 50.0, "measured: 8 samples of earlier audits of m", True))
    'the rate measured on 8 samples of earlier audits of m'
    """
    if rate.measured:
        return "the rate " + rate.source.replace("measured: ", "measured on ", 1)
    return "configs/audit.yaml's assumed rate"


def generation_hours(samples: int, rate: Throughput) -> float:
    """GPU-hours of generating ``samples`` at ``rate`` (generation only, as the audit's estimate).

    >>> generation_hours(3600, Throughput(tokens_per_s=500.0, tokens_per_sample=250.0, source=""))
    0.5
    """
    return samples * rate.tokens_per_sample / rate.tokens_per_s / 3600


def estimate(cells: list[Cell], configs: list[DictConfig], runs_dir: Path) -> list[AuditEstimate]:
    """One estimate per base model of the selected cells (every cell runs the same benchmark configs)."""
    audit_cfg = compose_config([], config_name="audit")
    samples_per_cell = samples_per_checkpoint(configs, audit_cfg)
    max_new = max_new_tokens(configs)
    backend = str(configs[0].generation.backend)
    seen = measured(runs_dir, backend)
    by_model: dict[str, int] = {}
    for cell in cells:
        by_model[cell.base_model] = by_model.get(cell.base_model, 0) + 1
    out = []
    for base_model, count in by_model.items():
        rate = throughput_of(base_model, max_new, seen, audit_cfg)
        samples = count * samples_per_cell
        hours = generation_hours(samples, rate)
        out.append(AuditEstimate(base_model, count, count * len(configs), samples, hours, rate))
    return out


def format_estimate(estimates: list[AuditEstimate], backend: str) -> str:
    """The dry run's table and totals."""
    lines = [f"{'base model':<24} {'cells':>5} {'evaluations':>11} {'samples':>10} {'GPU hours':>9}  tokens/s source"]
    for e in estimates:
        lines.append(
            f"{e.base_model:<24} {e.cells:>5} {e.evaluations:>11} {e.samples:>10} {e.gpu_hours:>9.2f}  "
            f"{e.throughput.tokens_per_s:,.0f} {e.throughput.source}"
        )
    total = sum(e.gpu_hours for e in estimates)
    lines.append(
        f"total: {sum(e.cells for e in estimates)} checkpoints, {sum(e.evaluations for e in estimates)} evaluations, "
        f"{sum(e.samples for e in estimates)} samples, about {total:.2f} GPU hours with {backend} "
        "(generation only; model loading and scoring not counted)"
    )
    return "\n".join(lines)


def as_rows(estimates: list[AuditEstimate]) -> list[dict[str, Any]]:
    return [{**e.__dict__, "throughput": e.throughput.__dict__} for e in estimates]
