"""Per-sample records and metric rows of a unit; the run's combined ``eval/metrics.parquet`` and ``samples.parquet``.

The combined files are what ``corewarding results ingest`` reads (see ``results/evaluation.py``); they are rewritten
only when a unit changed, so an unchanged rerun leaves them (and the store's ingestion ledger) untouched.
"""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from omegaconf import DictConfig

from corewarding.evaluation.benchmarks import Problem
from corewarding.evaluation.metrics import compute_metric
from corewarding.evaluation.provenance import checker_settings, checker_version
from corewarding.evaluation.scoring import score_responses
from corewarding.evaluation.targets import Target
from corewarding.evaluation.units import UnitPaths, digest, read_json, write_table_atomic
from corewarding.files import atomic_path, write_json_atomic
from corewarding.run_folder import EVAL, EVAL_INDEX, EVAL_METRICS, EVAL_SAMPLES, EVAL_UNITS
from corewarding.settings_diff import settings_json, settings_key

log = logging.getLogger(__name__)

SAMPLE_SCHEMA = pa.schema(
    [
        ("step", pa.int32()),
        ("benchmark", pa.string()),
        ("problem_id", pa.string()),
        ("sample_index", pa.int32()),
        ("question", pa.string()),
        ("response", pa.string()),
        ("extracted_answer", pa.string()),
        ("gold", pa.string()),
        ("correct_strict", pa.bool_()),
        ("correct_math_verify", pa.bool_()),
        ("length", pa.int32()),
        ("truncated", pa.bool_()),
        ("finish_reason", pa.string()),
        ("settings_key", pa.string()),  # the unit's settings (checker aside): an audit keeps one set per protocol
        ("checker_version_strict", pa.string()),  # the code that gave each verdict (provenance.checker_version)
        ("checker_version_math_verify", pa.string()),
    ]
)
METRIC_SCHEMA = pa.schema(
    [
        ("step", pa.int32()),
        ("benchmark", pa.string()),
        ("checker", pa.string()),
        ("metric", pa.string()),
        ("value", pa.float64()),
        ("ci_low", pa.float64()),
        ("ci_high", pa.float64()),
        ("n", pa.int32()),
        ("num_problems", pa.int32()),
        ("temperature", pa.float64()),
        ("seed", pa.int64()),
        ("model_revision", pa.string()),
        ("model", pa.string()),
        ("settings", pa.string()),
        ("settings_key", pa.string()),
    ]
)


def question_of(problem: Problem) -> str | None:
    """The text the model answered: the last user message of the problem's chat (None without one)."""
    users = [m.get("content") for m in problem.messages if m.get("role") == "user"]
    return str(users[-1]) if users and users[-1] is not None else None


def sample_rows(
    cfg: DictConfig, target: Target, problems: list[Problem], generations: list[dict[str, Any]], checker: Any
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Score every generation under the configured checkers; return the per-sample records (each with the version of
    every checker that gave it a verdict) and the counts."""
    gold_of = {p.problem_id: p.gold for p in problems}
    question = {p.problem_id: question_of(p) for p in problems}
    responses = [g["response"] for g in generations]
    golds = [gold_of[g["problem_id"]] for g in generations]
    scored = score_responses(responses, golds, checkers=list(cfg.checkers), math_verify=checker)
    strict_version = None if scored.correct_strict is None else checker_version("strict")
    math_verify_version = None if scored.correct_math_verify is None else checker_version("math_verify")
    rows = []
    for i, g in enumerate(generations):
        rows.append(
            {
                "step": target.step,
                "benchmark": str(cfg.benchmark.name),
                "problem_id": g["problem_id"],
                "sample_index": g["sample_index"],
                "question": question[g["problem_id"]],
                "response": g["response"],
                "extracted_answer": scored.extracted[i],
                "gold": golds[i],
                "correct_strict": None if scored.correct_strict is None else scored.correct_strict[i],
                "correct_math_verify": None if scored.correct_math_verify is None else scored.correct_math_verify[i],
                "checker_version_strict": strict_version,
                "checker_version_math_verify": math_verify_version,
                "length": g["length"],
                "truncated": g["finish_reason"] == "length",
                "finish_reason": g["finish_reason"],
            }
        )
    counts = {**scored.counts, "samples": len(rows), "truncated": sum(r["truncated"] for r in rows)}
    return rows, counts


def group_by_problem(problems: list[Problem], samples: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The sample records of each problem, in problem order (the grouping every metric of a unit shares)."""
    by_problem: dict[str, list[dict[str, Any]]] = {p.problem_id: [] for p in problems}
    for row in samples:
        by_problem[row["problem_id"]].append(row)
    return list(by_problem.values())


def metric_row(
    cfg: DictConfig,
    target: Target,
    grouped: list[list[dict[str, Any]]],
    checker: str,
    metric: str,
    settings: dict[str, Any],
) -> dict[str, Any]:
    """One aggregated metric under one checker, with its bootstrap interval (``grouped``: from group_by_problem) and
    the settings that produced it (``settings``: the unit's, see provenance.unit_settings)."""
    column = f"correct_{checker}"
    correct = [[bool(r[column]) for r in rows] for rows in grouped]
    answers = [[str(r["extracted_answer"] or "") for r in rows] for rows in grouped]
    value = compute_metric(
        metric,
        correct,
        answers,
        bootstrap=int(cfg.bootstrap.samples),
        confidence=float(cfg.bootstrap.confidence),
        seed=int(cfg.seed),
    )
    return {
        "step": target.step,
        "benchmark": str(cfg.benchmark.name),
        "checker": checker,
        "metric": metric,
        "value": value.value,
        "ci_low": value.ci_low,
        "ci_high": value.ci_high,
        "n": len(correct[0]) if correct else 0,
        "num_problems": len(correct),
        "temperature": float(cfg.benchmark.temperature),
        "seed": int(cfg.seed),
        "model_revision": target.revision,
        "model": target.model_path,
        **settings_columns(checker_settings(settings, checker)),
    }


def settings_columns(settings: dict[str, Any]) -> dict[str, str]:
    """The ``settings`` and ``settings_key`` columns of a metric row."""
    return {"settings": settings_json(settings), "settings_key": settings_key(settings)}


def write_unit_outputs(
    paths: UnitPaths, samples: list[dict[str, Any]] | None, metrics: list[dict[str, Any]], record: dict[str, Any]
) -> None:
    """Write a unit's samples and metrics, then its ``unit.json`` (the marker that the unit is complete)."""
    paths.unit.unlink(missing_ok=True)
    if samples is not None:
        write_table_atomic(samples, SAMPLE_SCHEMA, paths.samples)
    else:
        paths.samples.unlink(missing_ok=True)
    write_table_atomic(metrics, METRIC_SCHEMA, paths.metrics)
    write_json_atomic(record, paths.unit)


def _complete_units(units_dir: Path) -> list[tuple[Path, dict[str, Any]]]:
    units = []
    for marker in sorted(units_dir.glob("*/*/unit.json")):
        record = read_json(marker)
        if record is not None and (marker.parent / "metrics.parquet").is_file():
            units.append((marker.parent, record))
    return units


def _conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` with the schema's columns in order; a column an older unit file lacks (``question``) is null."""
    for name in schema.names:
        if name not in table.column_names:
            table = table.append_column(name, pa.nulls(table.num_rows, schema.field(name).type))
    return table.select(schema.names).cast(schema)


def _concat(paths: list[Path], schema: pa.Schema) -> pa.Table:
    tables = [_conform(pq.read_table(p), schema) for p in paths]
    return pa.concat_tables(tables) if tables else schema.empty_table()


def combine_units(out_dir: Path) -> bool:
    """Write ``eval/metrics.parquet`` and ``eval/samples.parquet`` from every complete unit; False if unchanged."""
    eval_dir = out_dir / EVAL
    units = _complete_units(out_dir / EVAL_UNITS)
    if not units:
        return False
    fingerprint = digest([(str(root.relative_to(eval_dir)), record) for root, record in units])
    index = read_json(out_dir / EVAL_INDEX)
    outputs = [out_dir / EVAL_METRICS, out_dir / EVAL_SAMPLES]
    if index and index.get("fingerprint") == fingerprint and all(p.is_file() for p in outputs):
        return False
    metrics = _concat([root / "metrics.parquet" for root, _ in units], METRIC_SCHEMA)
    samples = _concat(
        [root / "samples.parquet" for root, _ in units if (root / "samples.parquet").is_file()], SAMPLE_SCHEMA
    )
    keys = [("step", "ascending"), ("benchmark", "ascending")]
    with atomic_path(outputs[0]) as tmp:
        pq.write_table(metrics.sort_by([*keys, ("checker", "ascending"), ("metric", "ascending")]), tmp)
    with atomic_path(outputs[1]) as tmp:
        pq.write_table(samples.sort_by([*keys, ("problem_id", "ascending"), ("sample_index", "ascending")]), tmp)
    steps = Counter(str(root.parent.name) for root, _ in units)
    write_json_atomic({"fingerprint": fingerprint, "units": len(units), "by_step": dict(steps)}, out_dir / EVAL_INDEX)
    log.info(
        "wrote %s (%d metric rows) and %s (%d samples)", outputs[0], metrics.num_rows, outputs[1], samples.num_rows
    )
    return True
