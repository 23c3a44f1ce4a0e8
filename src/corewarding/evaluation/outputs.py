"""Per-sample records and metric rows of a unit; the run's combined ``eval/metrics.parquet`` and ``samples.parquet``.

Their columns are ``eval_rows``' tables, which ``corewarding results ingest`` reads too
(``results/ingest/evaluation.py``). The combined files are rewritten only when a unit changed, so an unchanged rerun
leaves them (and the store's ingestion ledger) untouched.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from corewarding.eval_rows import SAMPLE_CHECKERS, verdict_column, version_column
from corewarding.evaluation.benchmarks import Problem
from corewarding.evaluation.metrics import MetricValue, compute_metric, normal_interval
from corewarding.evaluation.provenance import UnitKeys, UnitSettings, digest
from corewarding.evaluation.scoring import Scored
from corewarding.evaluation.targets import Target
from corewarding.evaluation.units import METRIC_SCHEMA, SAMPLE_SCHEMA, complete_units, read_json
from corewarding.files import atomic_path, write_json_atomic
from corewarding.run_folder import EVAL, EVAL_INDEX, EVAL_METRICS, EVAL_SAMPLES, EVAL_UNITS

log = logging.getLogger(__name__)


def question_of(problem: Problem) -> str | None:
    """The text the model answered: the last user message of the problem's chat (None without one)."""
    users = [m.get("content") for m in problem.messages if m.get("role") == "user"]
    return str(users[-1]) if users and users[-1] is not None else None


def sample_rows(
    unit: UnitSettings,
    target: Target,
    keys: UnitKeys,
    problems: list[Problem],
    generations: list[dict[str, Any]],
    scored: Scored,
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """The per-sample records of the ``scored`` generations (each with the version of every checker that gave it a
    verdict, and the unit's settings key) and the counts."""
    gold_of = {p.problem_id: p.gold for p in problems}
    question = {p.problem_id: question_of(p) for p in problems}
    golds = [gold_of[g["problem_id"]] for g in generations]
    versions = {c: keys.checkers[c]["checker_version"] if c in keys.checkers else None for c in SAMPLE_CHECKERS}
    rows = []
    for i, g in enumerate(generations):
        row = {
            "step": target.step,
            "benchmark": unit.name,
            "problem_id": g["problem_id"],
            "sample_index": g["sample_index"],
            "question": question[g["problem_id"]],
            "response": g["response"],
            "extracted_answer": scored.extracted[i],
            "gold": golds[i],
            "length": g["length"],
            "truncated": g["finish_reason"] == "length",
            "finish_reason": g["finish_reason"],
            "settings_key": keys.settings_key,
        }
        for name in SAMPLE_CHECKERS:
            found = getattr(scored, verdict_column(name))  # Scored's lists are named as the sample columns
            row[verdict_column(name)] = None if found is None else found[i]
            row[version_column(name)] = versions[name]
        rows.append(row)
    counts = {**scored.counts, "samples": len(rows), "truncated": sum(r["truncated"] for r in rows)}
    return rows, counts


def group_by_problem(problems: list[Problem], samples: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The sample records of each problem, in problem order (the grouping every metric of a unit shares)."""
    by_problem: dict[str, list[dict[str, Any]]] = {p.problem_id: [] for p in problems}
    for row in samples:
        by_problem[row["problem_id"]].append(row)
    return list(by_problem.values())


def metric_row(
    unit: UnitSettings,
    target: Target,
    keys: UnitKeys,
    checker: str,
    metric: str,
    value: MetricValue,
    n: int,
    num_problems: int,
) -> dict[str, Any]:
    """One metric row of a unit, math or external: the value with its interval, and the settings that produced it
    (the unit's ``keys``, with ``checker`` and its version)."""
    return {
        "step": target.step,
        "benchmark": unit.name,
        "checker": checker,
        "metric": metric,
        "value": value.value,
        "ci_low": value.ci_low,
        "ci_high": value.ci_high,
        "n": n,
        "num_problems": num_problems,
        "temperature": unit.sampling.temperature,
        "seed": unit.seed,
        "model_revision": target.revision,
        "model": target.model_path,
        **keys.columns[checker],
    }


def math_metric_rows(
    unit: UnitSettings, target: Target, keys: UnitKeys, grouped: list[list[dict[str, Any]]]
) -> list[dict[str, Any]]:
    """Each configured metric under each checker, with its bootstrap interval (``grouped``: from
    group_by_problem)."""
    rows = []
    for checker, metric in unit.pairs:
        column = verdict_column(checker)
        correct = [[bool(r[column]) for r in samples] for samples in grouped]
        answers = [[str(r["extracted_answer"] or "") for r in samples] for samples in grouped]
        boot = unit.bootstrap
        value = compute_metric(
            metric, correct, answers, bootstrap=boot.samples, confidence=boot.confidence, seed=unit.seed
        )
        n = len(correct[0]) if correct else 0
        rows.append(metric_row(unit, target, keys, checker, metric, value, n, len(correct)))
    return rows


def tool_metric_rows(
    unit: UnitSettings,
    target: Target,
    keys: UnitKeys,
    tool: str,
    metrics: Mapping[str, float],
    stderr: Mapping[str, float],
    num_problems: int,
) -> list[dict[str, Any]]:
    """An external tool's metrics (``keys``: with the tool as the checker, ``UnitKeys.with_tool``), each with the
    normal interval of its standard error when the tool gives one."""
    rows = []
    for metric, value in metrics.items():
        interval = normal_interval(value, stderr.get(metric))
        rows.append(metric_row(unit, target, keys, tool, metric, interval, unit.benchmark.n, num_problems))
    return rows


def unit_rows(
    unit: UnitSettings,
    target: Target,
    keys: UnitKeys,
    problems: list[Problem],
    generations: list[dict[str, Any]],
    scored: Scored,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, int]]:
    """A math unit's sample records, metric rows and counts from its ``scored`` generations."""
    samples, counts = sample_rows(unit, target, keys, problems, generations, scored)
    return samples, math_metric_rows(unit, target, keys, group_by_problem(problems, samples)), counts


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
    units = complete_units(out_dir / EVAL_UNITS)
    if not units:
        return False
    index = read_json(out_dir / EVAL_INDEX)
    fingerprint = digest([(str(root.relative_to(eval_dir)), record) for root, record in units])
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
