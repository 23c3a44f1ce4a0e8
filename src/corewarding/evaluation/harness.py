"""Evaluate targets (checkpoint steps or models) on benchmarks: generate, score, aggregate, resume, combine.

Every (target, benchmark) unit is keyed by what shaped its generations (model revision, data, sampling, backend,
seed) and by how they are scored (checkers, metrics, bootstrap). A unit whose keys match is not touched again, so a
rerun with unchanged inputs loads no model and writes nothing; a change of scoring alone rescores the stored
generations; an interrupted generation resumes at its first unfinished chunk.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from corewarding.evaluation.benchmarks import Problem, load_problems
from corewarding.evaluation.external_units import evaluate_external_unit
from corewarding.evaluation.outputs import (
    combine_units,
    group_by_problem,
    metric_row,
    sample_rows,
    write_unit_outputs,
)
from corewarding.evaluation.provenance import prompt_of, unit_settings
from corewarding.evaluation.targets import Target
from corewarding.evaluation.units import UnitOutcome, UnitPaths, digest, unit_folder
from corewarding.extras import BackendUnavailable
from corewarding.files import file_sha256
from corewarding.grading.equivalence import MathVerifyChecker
from corewarding.lm.generation import Generator, SamplingSettings, load_generator, vllm_dtype
from corewarding.run_folder import EVAL_UNITS
from corewarding.settings_diff import settings_key

log = logging.getLogger(__name__)

GeneratorFactory = Callable[[DictConfig, str], Generator]


class ModelHandle:
    """A target's generator, loaded on first use (a unit with nothing to generate never loads the model)."""

    def __init__(self, target: Target, factory: GeneratorFactory) -> None:
        self.target = target
        self.factory = factory
        self._generator: Generator | None = None
        self._cfg: DictConfig | None = None

    def get(self, cfg: DictConfig) -> Generator:
        if self._generator is not None and self._cfg is not None and self._cfg.generation != cfg.generation:
            self.close()
        if self._generator is None:
            log.info("loading %s (%s) with %s", self.target.model_path, self.target.label, cfg.generation.backend)
            self._generator = self.factory(cfg, self.target.model_path)
            self._cfg = cfg
        return self._generator

    def close(self) -> None:
        if self._generator is not None:
            self._generator.close()
            self._generator = None


def sampling_of(cfg: DictConfig) -> SamplingSettings:
    spec = cfg.benchmark
    temperature = float(spec.temperature)
    n = 1 if temperature == 0 else int(spec.n)
    return SamplingSettings(n, temperature, float(spec.top_p), int(spec.max_new_tokens))


def generation_material(cfg: DictConfig, target: Target, data_path: Path) -> dict[str, Any]:
    """Everything that shapes the generated responses of a unit (vLLM's dtype: the one it runs with here)."""
    spec = cfg.benchmark
    generation: dict[str, Any] = OmegaConf.to_container(cfg.generation)  # type: ignore[assignment]
    if generation.get("backend") == "vllm":
        generation["dtype"] = vllm_dtype(str(generation["dtype"]))
    return {
        "model_revision": target.revision,
        "data_sha256": file_sha256(data_path),
        "benchmark": {k: spec[k] for k in ("name", "system_prompt", "answer_field", "limit")},
        "sampling": sampling_of(cfg).__dict__,
        "generation": generation,
        "seed": int(cfg.seed),
        "chunk_size": int(cfg.chunk_size),
    }


def scoring_material(cfg: DictConfig) -> dict[str, Any]:
    """Everything that turns generations into verdicts and metrics."""
    return {
        "checkers": list(cfg.checkers),
        "math_verify_timeout_s": float(cfg.math_verify.timeout_s),
        "metrics": list(cfg.benchmark.metrics),
        "bootstrap": OmegaConf.to_container(cfg.bootstrap),
        "seed": int(cfg.seed),
    }


def generate_unit(
    paths: UnitPaths,
    key: str,
    problems: list[Problem],
    cfg: DictConfig,
    handle: ModelHandle,
    timing: dict[str, float] | None = None,
) -> list[dict[str, Any]]:
    """All generations of a unit, chunk by chunk; finished chunks of an earlier attempt are reused. The seconds
    spent generating (model loading excluded) are added to ``timing["generation_seconds"]``."""
    timing = {} if timing is None else timing
    sampling = sampling_of(cfg)
    size = int(cfg.chunk_size)
    rows: list[dict[str, Any]] = []
    for index in range(math.ceil(len(problems) / size)):
        chunk = paths.read_chunk(key, index)
        if chunk is None:
            part = problems[index * size : (index + 1) * size]
            generator = handle.get(cfg)  # loading the model is not generation time
            started = time.perf_counter()
            completions = generator.generate([p.messages for p in part], sampling, int(cfg.seed) + index)
            timing["generation_seconds"] = timing.get("generation_seconds", 0.0) + time.perf_counter() - started
            chunk = [
                {
                    "problem_id": problem.problem_id,
                    "sample_index": i,
                    "response": c.text,
                    "length": c.num_tokens,
                    "finish_reason": c.finish_reason,
                }
                for problem, samples in zip(part, completions, strict=True)
                for i, c in enumerate(samples)
            ]
            paths.write_chunk(key, index, chunk)
            log.info("%s: chunk %d done (%d problems)", paths.root, index, len(part))
        rows += chunk
    return rows


def evaluate_math_unit(
    cfg: DictConfig,
    target: Target,
    units_dir: Path,
    handle: ModelHandle,
    checker: Any,
    keep_settings: bool = False,
) -> UnitOutcome:
    """Generate (or reuse), score and aggregate one math benchmark for one target."""
    name = str(cfg.benchmark.name)
    problems, data_path = load_problems(cfg)
    gen_material = generation_material(cfg, target, data_path)
    settings = unit_settings(
        cfg,
        model_path=target.model_path,
        model_revision=target.revision,
        benchmark_sha256=gen_material["data_sha256"],
        prompt=prompt_of(problems, str(cfg.benchmark.system_prompt)),
        n=sampling_of(cfg).n,
    )
    unit_key = settings_key(settings)
    paths = UnitPaths(unit_folder(units_dir, target.label, name, unit_key if keep_settings else None))
    gen_key, score_key = digest(gen_material), digest(scoring_material(cfg))
    if paths.is_done(gen_key, score_key):
        return UnitOutcome(target.step, name, "unchanged")
    status = "rescored"
    timing: dict[str, float] = {}
    if not paths.has_generations(gen_key):
        rows = generate_unit(paths, gen_key, problems, cfg, handle, timing)
        paths.commit_generations(gen_key, rows, gen_material)
        status = "evaluated"
    generations = paths.read_generations()
    started = time.perf_counter()
    samples, counts = sample_rows(cfg, target, problems, generations, checker)
    for row in samples:
        row["settings_key"] = unit_key
    grouped = group_by_problem(problems, samples)
    metrics = [metric_row(cfg, target, grouped, checker_name, metric, settings) for checker_name, metric in _pairs(cfg)]
    timing["scoring_seconds"] = time.perf_counter() - started
    if status == "evaluated":
        counts["generated_tokens"] = sum(int(g["length"] or 0) for g in generations)
    record = {"generation_key": gen_key, "scoring_key": score_key, "counts": counts, "timing": timing}
    write_unit_outputs(paths, samples, metrics, record)
    headline = {f"{m['metric']}/{m['checker']}": m["value"] for m in metrics}
    return UnitOutcome(target.step, name, status, metrics=headline, counts=counts, timing=timing)


def _pairs(cfg: DictConfig) -> list[tuple[str, str]]:
    return [(str(c), str(m)) for c in cfg.checkers for m in cfg.benchmark.metrics]


def evaluate_targets(
    targets: Sequence[Target],
    configs: Sequence[DictConfig],
    out_dir: Path,
    generator_factory: GeneratorFactory = load_generator,
    keep_settings: bool = False,
) -> list[UnitOutcome]:
    """Evaluate every target on every benchmark config, then combine all units into ``out_dir/eval``.

    ``keep_settings``: a unit evaluated under other settings (a seed, a backend) is kept beside the earlier ones, not
    replaced (what an audit of released checkpoints wants); by default a run's step has one score per benchmark."""

    units_dir = out_dir / EVAL_UNITS
    first = configs[0]
    checker = MathVerifyChecker(first.math_verify.workers, float(first.math_verify.timeout_s))  # None: one per core
    if any("math_verify" in cfg.checkers for cfg in configs):
        checker.start(wait_ready=False)  # the workers warm up while the first unit generates
    outcomes: list[UnitOutcome] = []
    try:
        for target in targets:
            handle = ModelHandle(target, generator_factory)
            try:
                for cfg in configs:
                    try:
                        if cfg.benchmark.kind == "external":
                            outcomes.append(evaluate_external_unit(cfg, target, units_dir, keep_settings))
                        else:
                            outcomes.append(evaluate_math_unit(cfg, target, units_dir, handle, checker, keep_settings))
                    except BackendUnavailable:  # every unit would fail the same way: one error, not one per unit
                        raise
                    except Exception as exc:  # one unit's failure (data, model, tool) does not stop the others
                        log.exception("%s %s failed", target.label, cfg.benchmark.name)
                        outcomes.append(UnitOutcome(target.step, str(cfg.benchmark.name), "failed", f"error: {exc}"))
                    log.info("%s %s: %s", target.label, cfg.benchmark.name, outcomes[-1].status)
            finally:
                handle.close()
    finally:
        checker.close()
        combine_units(out_dir)  # whatever units are complete, also after an interruption
    return outcomes
