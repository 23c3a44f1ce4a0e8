"""Evaluate every saved checkpoint step of a run on benchmarks, once per checkpoint signature and settings.

A complete evaluation leaves ``eval/pipeline.json`` (the stamp): each saved step's signature
(``targets.checkpoint_signature``), the benchmarks, and the SHA-256 of their resolved settings. A run whose stamp is
current is not evaluated again; a step saved again (a resumed or retrained run) or a changed setting makes a new one.
The stamp is checked before any checkpoint is merged or hashed, so a skipped run costs a few file reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from corewarding.evaluation.eval_config import benchmark_configs, configs_sha256, expand_benchmarks
from corewarding.evaluation.harness import GeneratorFactory, evaluate_targets
from corewarding.evaluation.targets import checkpoint_signature, step_targets
from corewarding.evaluation.units import UnitOutcome, read_json
from corewarding.files import write_json_atomic
from corewarding.lm.generation import load_generator
from corewarding.run_folder import EVAL_STAMP, checkpoints_dir, eval_dir, saved_checkpoints


@dataclass(frozen=True)
class RunEvaluation:
    """What evaluating a run did: ``skipped`` says why nothing was done; else each unit's outcome, and the saved
    steps evaluated (the stamp is written only when no unit failed)."""

    outcomes: list[UnitOutcome] = field(default_factory=list)
    steps: list[int] = field(default_factory=list)
    skipped: str | None = None

    @property
    def failed(self) -> list[UnitOutcome]:
        return [o for o in self.outcomes if o.status == "failed"]


def evaluate_run(
    run_dir: Path,
    benchmarks: str,
    overrides: Sequence[str],
    force: bool = False,
    generator_factory: GeneratorFactory = load_generator,
) -> RunEvaluation:
    """Evaluate every saved step of ``run_dir`` on ``benchmarks`` (names and suites, comma-separated) composed with
    ``overrides``; skipped when the stamp is current (unless ``force``), or when no checkpoint is left of a run
    evaluated before. FileNotFoundError when the run has no checkpoint and was never evaluated."""
    stamp_path = eval_dir(run_dir) / EVAL_STAMP
    checkpoints = checkpoints_dir(run_dir)
    saved = saved_checkpoints(checkpoints)
    stored = read_json(stamp_path)
    names = expand_benchmarks(benchmarks)
    configs = benchmark_configs(names, overrides)
    settings_sha256 = configs_sha256(configs)
    stamp = {"steps": checkpoint_signature(saved), "benchmarks": names, "settings_sha256": settings_sha256}
    if not force and stored == stamp:
        return RunEvaluation(skipped="every saved step evaluated")
    if not saved:
        if stored is not None:  # checkpoints removed after evaluation: what was measured stays
            return RunEvaluation(skipped="no checkpoint left; evaluated before")
        raise FileNotFoundError(f"{checkpoints}: no saved checkpoint to evaluate")
    targets = step_targets(run_dir, saved)
    result = RunEvaluation(evaluate_targets(targets, configs, run_dir, generator_factory), sorted(saved))
    if not result.failed:
        write_json_atomic(stamp, stamp_path)
    return result
