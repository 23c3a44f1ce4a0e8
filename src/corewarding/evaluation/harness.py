"""Evaluate targets (checkpoint steps or models) on benchmarks: generate, score, aggregate, resume, combine.

Every (target, benchmark) unit is keyed by what shaped its generations (model revision, data, sampling, backend,
seed) and by how they are scored (checkers, metrics, bootstrap): ``provenance.UnitSettings``, read from each
benchmark's config once, gives both keys. A unit whose keys match is not touched again, so a rerun with
unchanged inputs loads no model and writes nothing; a change of scoring alone rescores the stored generations; an
interrupted generation resumes at its first unfinished chunk.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from corewarding.evaluation.benchmarks import Problem, load_problems
from corewarding.evaluation.external_units import run_external_unit
from corewarding.evaluation.outputs import combine_units, unit_rows
from corewarding.evaluation.provenance import UnitKeys, UnitSettings
from corewarding.evaluation.scoring import score_generations
from corewarding.evaluation.targets import Target
from corewarding.evaluation.units import UnitOutcome, UnitOutputs, UnitPaths
from corewarding.extras import BackendUnavailable
from corewarding.grading.equivalence import MathVerifyChecker
from corewarding.lm.generation import Generator, load_generator
from corewarding.run_folder import EVAL_UNITS

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


def generate_unit(
    paths: UnitPaths,
    keys: UnitKeys,
    problems: list[Problem],
    cfg: DictConfig,
    unit: UnitSettings,
    handle: ModelHandle,
    timing: dict[str, float],
) -> tuple[list[dict[str, Any]], bool]:
    """A unit's generations, and whether they were made now: those committed under its generation key, else all of
    them chunk by chunk (finished chunks of an earlier attempt are reused), then committed. The seconds spent
    generating (model loading excluded) are added to ``timing["generation_seconds"]``."""
    stored = paths.stored_generations(keys.generation)
    if stored is not None:
        return stored, False
    size = unit.chunk_size
    rows: list[dict[str, Any]] = []
    for index in range(math.ceil(len(problems) / size)):
        chunk = paths.read_chunk(keys.generation, index)
        if chunk is None:
            part = problems[index * size : (index + 1) * size]
            generator = handle.get(cfg)  # loading the model is not generation time
            started = time.perf_counter()
            completions = generator.generate([p.messages for p in part], unit.sampling, unit.seed + index)
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
            paths.write_chunk(keys.generation, index, chunk)
            log.info("%s: chunk %d done (%d problems)", paths.root, index, len(part))
        rows += chunk
    paths.commit_generations(keys.generation, rows, keys.material)
    return rows, True


def math_unit(
    cfg: DictConfig,
    unit: UnitSettings,
    target: Target,
    keys: UnitKeys,
    problems: list[Problem],
    paths: UnitPaths,
    handle: ModelHandle,
    checker: Any,
) -> tuple[UnitOutcome, UnitOutputs]:
    """Generate a math unit (or reuse its stored generations), score and aggregate it."""
    timing: dict[str, float] = {}
    generations, generated = generate_unit(paths, keys, problems, cfg, unit, handle, timing)
    started = time.perf_counter()
    scored = score_generations(generations, problems, unit.checkers, checker)
    samples, metrics, counts = unit_rows(unit, target, keys, problems, generations, scored)
    timing["scoring_seconds"] = time.perf_counter() - started
    if generated:
        counts["generated_tokens"] = sum(int(g["length"] or 0) for g in generations)
    record = {"generation_key": keys.generation, "scoring_key": keys.scoring, "counts": counts, "timing": timing}
    headline = {f"{m['metric']}/{m['checker']}": m["value"] for m in metrics}
    status = "evaluated" if generated else "rescored"
    outcome = UnitOutcome(target.step, unit.name, status, metrics=headline, counts=counts, timing=timing)
    return outcome, UnitOutputs(samples, metrics, record)


def evaluate_unit(
    cfg: DictConfig,
    unit: UnitSettings,
    target: Target,
    units_dir: Path,
    handle: ModelHandle,
    checker: Any,
    keep_settings: bool = False,
) -> UnitOutcome:
    """Evaluate one benchmark for one target, unless the unit stored under its keys is done: a math benchmark is
    generated (or its stored generations reused) and scored, an external one run by its tool; then the unit's
    outputs are written (none when the tool is missing)."""
    problems: list[Problem] = []
    data_path: Path | None = None
    if unit.kind != "external":
        problems, data_path = load_problems(cfg)
    keys = unit.keys(target, data_path, problems)
    paths = UnitPaths.at(units_dir, target.label, unit.name, keys.settings_key if keep_settings else None)
    if paths.is_done(keys.generation, keys.scoring):
        return UnitOutcome(target.step, unit.name, "unchanged")
    if unit.kind == "external":
        outcome, outputs = run_external_unit(unit, target, keys, paths.root)
    else:
        outcome, outputs = math_unit(cfg, unit, target, keys, problems, paths, handle, checker)
    if outputs is not None:
        paths.write_outputs(outputs)
    return outcome


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
    units = [UnitSettings.from_config(cfg) for cfg in configs]  # read once: every key and row of a unit uses it
    checker = MathVerifyChecker(units[0].math_verify_workers, units[0].math_verify_timeout_s)  # None: one per core
    if any("math_verify" in unit.checkers for unit in units):
        checker.start(wait_ready=False)  # the workers warm up while the first unit generates
    outcomes: list[UnitOutcome] = []
    try:
        for target in targets:
            handle = ModelHandle(target, generator_factory)
            try:
                for cfg, unit in zip(configs, units, strict=True):
                    try:
                        outcomes.append(evaluate_unit(cfg, unit, target, units_dir, handle, checker, keep_settings))
                    except BackendUnavailable:  # every unit would fail the same way: one error, not one per unit
                        raise
                    except Exception as exc:  # one unit's failure (data, model, tool) does not stop the others
                        log.exception("%s %s failed", target.label, unit.name)
                        outcomes.append(UnitOutcome(target.step, unit.name, "failed", f"error: {exc}"))
                    log.info("%s %s: %s", target.label, unit.name, outcomes[-1].status)
            finally:
                handle.close()
    finally:
        checker.close()
        combine_units(out_dir)  # whatever units are complete, also after an interruption
    return outcomes
