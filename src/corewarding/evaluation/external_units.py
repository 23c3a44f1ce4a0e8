"""A unit of an external benchmark (IFEval, MMLU-Pro, LiveCodeBench, CRUX): run its tool, make its numbers rows.

Its metric rows use the tool as the ``checker`` (``lm_eval``, ``livecodebench``, ``zeroeval``) and carry no per-sample
records (the tool's own full output is kept beside them). When the tool is not installed the unit is skipped with the
tool's message and nothing is written. The harness checks the unit's keys before and writes its rows after
(``harness.evaluate_unit``).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from corewarding.evaluation.external import ExternalBenchmark, RunSettings, missing_reason, run_external
from corewarding.evaluation.outputs import tool_metric_rows
from corewarding.evaluation.provenance import UnitKeys, UnitSettings
from corewarding.evaluation.targets import Target
from corewarding.evaluation.units import UnitOutcome, UnitOutputs

log = logging.getLogger(__name__)


def run_settings(unit: UnitSettings) -> RunSettings:
    """How the tool runs: vLLM, or lm-eval's transformers backend (``hf``) where our transformers generation would."""
    backend = "vllm" if unit.generation.backend == "vllm" else "hf"
    options: dict[str, Any] = dict(unit.benchmark.options)
    if backend == "hf":
        options = {"device": unit.generation.device, "dtype": unit.generation.dtype, **options}
    return RunSettings(backend=backend, seed=unit.seed, limit=unit.benchmark.limit, options=options)


def run_external_unit(
    unit: UnitSettings, target: Target, keys: UnitKeys, folder: Path
) -> tuple[UnitOutcome, UnitOutputs | None]:
    """Run one external benchmark's tool for one target (its own output kept in ``folder/tool_output``): the outcome
    and the unit's outputs, or a skipped outcome and nothing to write when the tool is missing."""
    run = run_settings(unit)
    benchmark = ExternalBenchmark.from_spec(unit.resolved_benchmark)
    reason = missing_reason(benchmark, run)
    if reason is not None:
        log.warning("skipping %s: %s", unit.name, reason)
        return UnitOutcome(target.step, unit.name, "skipped", message=reason), None
    result = run_external(benchmark, target.model_path, folder / "tool_output", benchmark.sampling, run)
    keys = keys.with_tool(result.tool, result.tool_version)
    rows = tool_metric_rows(unit, target, keys, result.tool, result.metrics, result.stderr, result.num_problems)
    record = {"generation_key": keys.generation, "scoring_key": keys.scoring, "tool": result.tool,
              "tool_version": result.tool_version}  # fmt: skip
    outcome = UnitOutcome(target.step, unit.name, "evaluated", metrics=dict(result.metrics))
    return outcome, UnitOutputs(None, rows, record)
