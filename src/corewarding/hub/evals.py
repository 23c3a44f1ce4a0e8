"""The evaluated metrics of one checkpoint step, as the model card reports them.

Rows come from the run's ``eval/metrics.parquet`` (written by ``corewarding evaluate``). Per benchmark one checker is
reported: ``math_verify`` where the benchmark has it, else ``strict``, else the benchmark's own tool (``lm_eval``,
...). Rows evaluated on other weights than the ones published (their ``model_revision`` is not the checkpoint
folder's fingerprint, e.g. a run trained again since) are left out and counted.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from huggingface_hub import EvalResult

from corewarding.config import load_group_option
from corewarding.eval_rows import PREFERRED_CHECKERS
from corewarding.hub.errors import PublishInputError
from corewarding.run_folder import EVAL_METRICS

log = logging.getLogger(__name__)

CHECKER_PREFERENCE = PREFERRED_CHECKERS  # math_verify, strict


@dataclass(frozen=True)
class StepEvals:
    """The rows reported for a step (one checker per benchmark), the base model's matching rows, rows left out."""

    rows: list[dict[str, Any]]
    base: dict[tuple[str, str, str], dict[str, Any]]  # (benchmark, checker, metric) -> the base model's row
    stale: int


def read_eval_rows(run_dir: Path) -> list[dict[str, Any]]:
    """Every row of ``eval/metrics.parquet`` (none when the run was not evaluated)."""
    path = run_dir / EVAL_METRICS
    if not path.is_file():
        return []
    try:
        rows: list[dict[str, Any]] = pq.read_table(path).to_pylist()
    except (OSError, ValueError) as exc:
        raise PublishInputError(f"{path}: cannot read parquet ({exc})") from exc
    missing = {"step", "benchmark", "checker", "metric", "value"} - set(rows[0] if rows else {})
    if rows and missing:
        raise PublishInputError(f"{path}: missing column(s) {', '.join(sorted(missing))}")
    return rows


def preferred_checker(checkers: set[str]) -> str:
    """``math_verify`` > ``strict`` > the first other checker by name."""
    for name in CHECKER_PREFERENCE:
        if name in checkers:
            return name
    return sorted(checkers)[0]


def _reportable(row: dict[str, Any]) -> bool:
    value = row.get("value")
    return isinstance(value, int | float) and math.isfinite(value)


def step_evals(rows: list[dict[str, Any]], step: int, revision: str | None) -> StepEvals:
    """The rows to report for ``step``; ``revision`` is the published weights' fingerprint (None: no check)."""
    mine = [r for r in rows if r.get("step") == step and _reportable(r)]
    fresh = [r for r in mine if revision is None or r.get("model_revision") in (None, revision)]
    if len(fresh) < len(mine):
        log.warning(
            "step %d: %d evaluation row(s) were computed on other weights than %s; left out of the card",
            step,
            len(mine) - len(fresh),
            revision,
        )
    checkers: dict[str, set[str]] = {}
    for r in fresh:
        checkers.setdefault(str(r["benchmark"]), set()).add(str(r["checker"]))
    chosen = {b: preferred_checker(c) for b, c in checkers.items()}
    reported = sorted(
        (r for r in fresh if chosen[str(r["benchmark"])] == r["checker"]),
        key=lambda r: (str(r["benchmark"]), str(r["metric"])),
    )
    base = {
        (str(r["benchmark"]), str(r["checker"]), str(r["metric"])): r
        for r in rows
        if r.get("step") is None and _reportable(r)
    }
    return StepEvals(reported, base, len(mine) - len(fresh))


def benchmark_dataset_id(name: str) -> str:
    """The Hub dataset a benchmark's problems come from (its datasource's ``hub_id``), else the benchmark's name."""
    try:
        source = load_group_option("benchmark", name).benchmark.get("datasource")
        hub_id = load_group_option("datasource", str(source)).datasource.get("hub_id") if source else None
    except KeyError:
        return name
    return str(hub_id) if hub_id else name


def metric_label(row: dict[str, Any]) -> str:
    """``pass@1 (math_verify, n=8, T=0.8)``: the metric with the settings that produced it."""
    parts = [str(row["checker"])]
    if row.get("n") is not None:
        parts.append(f"n={row['n']}")
    if row.get("temperature") is not None:
        parts.append(f"T={row['temperature']:g}")
    return f"{row['metric']} ({', '.join(parts)})"


def eval_results(rows: list[dict[str, Any]]) -> list[EvalResult]:
    """One model-index entry per (benchmark, metric); the value is the parquet's, a fraction in [0, 1]."""
    results = []
    for row in rows:
        args = {k: row[k] for k in ("checker", "n", "num_problems", "temperature", "seed") if row.get(k) is not None}
        results.append(
            EvalResult(
                task_type="text-generation",
                task_name="Reasoning",
                dataset_type=benchmark_dataset_id(str(row["benchmark"])),
                dataset_name=str(row["benchmark"]),
                metric_type=str(row["metric"]),
                metric_value=float(row["value"]),
                metric_name=metric_label(row),
                metric_args=args,
            )
        )
    return results
