"""A unit of an external benchmark (IFEval, MMLU-Pro, LiveCodeBench, CRUX): run its tool, store its numbers.

Its metric rows use the tool as the ``checker`` (``lm_eval``, ``livecodebench``, ``zeroeval``) and carry no per-sample
records (the tool's own full output is kept beside them). When the tool is not installed the unit is skipped with the
tool's message and nothing is written.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from corewarding.evaluation.external import ExternalBenchmark, RunSettings, missing_reason, run_external
from corewarding.evaluation.outputs import settings_columns, write_unit_outputs
from corewarding.evaluation.provenance import checker_settings, unit_settings
from corewarding.evaluation.targets import Target
from corewarding.evaluation.units import UnitOutcome, UnitPaths, digest, unit_folder
from corewarding.settings_diff import settings_key

log = logging.getLogger(__name__)


def external_material(cfg: DictConfig, target: Target) -> dict[str, object]:
    """Everything that shapes an external benchmark's result."""
    return {
        "model_revision": target.revision,
        "benchmark": OmegaConf.to_container(cfg.benchmark),
        "backend": str(cfg.generation.backend),
        "seed": int(cfg.seed),
    }


def evaluate_external_unit(
    cfg: DictConfig, target: Target, units_dir: Path, keep_settings: bool = False
) -> UnitOutcome:
    """Run one external benchmark for one target, unless it is done or its tool is missing."""

    spec = cfg.benchmark
    name = str(spec.name)
    settings = unit_settings(
        cfg,
        model_path=target.model_path,
        model_revision=target.revision,
        benchmark_sha256=None,  # the tool reads its own copy of the benchmark
        prompt=str(spec.get("system_prompt") or ""),
        n=int(spec.n),
    )
    paths = UnitPaths(unit_folder(units_dir, target.label, name, settings_key(settings) if keep_settings else None))
    key = digest(external_material(cfg, target))
    if paths.is_done(key, key):
        return UnitOutcome(target.step, name, "unchanged")
    backend = "vllm" if cfg.generation.backend == "vllm" else "hf"
    options: dict[str, Any] = dict(OmegaConf.to_container(spec.options)) if spec.get("options") else {}  # type: ignore[arg-type]
    if backend == "hf":  # lm-eval's transformers backend runs where our transformers generation would
        options = {"device": str(cfg.generation.device), "dtype": str(cfg.generation.dtype), **options}
    benchmark = ExternalBenchmark.from_spec(OmegaConf.to_container(spec, resolve=True))  # type: ignore[arg-type]
    run = RunSettings(
        backend=backend, seed=int(cfg.seed), limit=None if spec.limit is None else int(spec.limit), options=options
    )
    reason = missing_reason(benchmark, run)
    if reason is not None:
        log.warning("skipping %s: %s", name, reason)
        return UnitOutcome(target.step, name, "skipped", message=reason)
    result = run_external(benchmark, target.model_path, paths.root / "tool_output", benchmark.sampling, run)
    rows = [
        {
            "step": target.step,
            "benchmark": name,
            "checker": result.tool,
            "metric": metric,
            "value": value,
            "ci_low": value - 1.96 * result.stderr[metric] if metric in result.stderr else None,
            "ci_high": value + 1.96 * result.stderr[metric] if metric in result.stderr else None,
            "n": int(spec.n),
            "num_problems": result.num_problems,
            "temperature": float(spec.temperature),
            "seed": int(cfg.seed),
            "model_revision": target.revision,
            "model": target.model_path,
            **settings_columns(checker_settings(settings, result.tool, result.tool_version)),
        }
        for metric, value in result.metrics.items()
    ]
    record = {"generation_key": key, "scoring_key": key, "tool": result.tool, "tool_version": result.tool_version}
    write_unit_outputs(paths, None, rows, record)
    return UnitOutcome(target.step, name, "evaluated", metrics=dict(result.metrics))
