"""verl's per-step metrics -> ``{run_dir}/metrics.jsonl`` in the local backend's format (methods.md section 10).

verl writes one JSON line per step with its ``file`` tracker (``{"step": N, "data": {...}}``, to the file named by
``VERL_FILE_LOGGER_PATH``); each launch of a run writes a new ``verl_logs/attempt-NNN.jsonl``. A resumed attempt
redoes the steps after its checkpoint, so its records replace the earlier attempts' from its first step on.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from corewarding.methods.base import PER_VIEW_LOSS_METRICS, VIEW_TAGS
from corewarding.methods.co_rewarding_3 import LABEL_METRICS

log = logging.getLogger(__name__)

ATTEMPT_GLOB = "attempt-*.jsonl"
FROM_VERL = {
    "epoch": "training/epoch",
    "response_length_mean": "response_length/mean",
    "truncation_rate": "response_length/clip_ratio",
    "entropy_mean": "actor/entropy",
    "kl_mean": "actor/kl_loss",
    "pg_loss": "actor/pg_loss",
    "clipfrac": "actor/pg_clipfrac",
    "grad_norm": "actor/grad_norm",
    "lr": "actor/lr",
    "step_seconds": "timing_s/step",
}
# verl's own system figures, kept under verl's names (the dashboard's run page shows them: docs/results.md)
SYSTEM_FROM_VERL = (
    "perf/throughput",
    "perf/time_per_step",
    "perf/max_memory_allocated_gb",
    "perf/max_memory_reserved_gb",
)
FROM_VERL.update({key: key for key in SYSTEM_FROM_VERL})
PER_VIEW_FROM_VERL = {
    "entropy_mean": "actor/entropy", "kl_mean": "actor/kl_loss", "pg_loss": "actor/pg_loss",
    "clipfrac": "actor/pg_clipfrac", "ppo_kl": "actor/ppo_kl",
}  # fmt: skip
for _tag in VIEW_TAGS.values():  # two-view methods: each view's losses and entropy, ``pg_loss_ori`` <- ``..._ori``
    # (what each name means on both backends: docs/training.md, "What the loss metrics mean")
    FROM_VERL.update({f"{ours}_{_tag}": f"{theirs}_{_tag}" for ours, theirs in PER_VIEW_FROM_VERL.items()})
VIEW_LABEL_METRICS = tuple(f"{tag}_{name}" for tag in VIEW_TAGS.values() for name in LABEL_METRICS)
FROM_HOOK = (
    "reward_mean", "label_accuracy", "nonempty_label_rate", "vote_agreement", "missing_ground_truth",
    "math_verify_timeouts", "math_verify_errors", *VIEW_LABEL_METRICS,
)  # fmt: skip
ORDER = (
    "step", "epoch", "reward_mean", "label_accuracy", "nonempty_label_rate", "vote_agreement",
    "missing_ground_truth", *VIEW_LABEL_METRICS, "response_length_mean", "truncation_rate", "entropy_mean",
    *(f"entropy_mean_{tag}" for tag in VIEW_TAGS.values()), "kl_mean", "pg_loss", "clipfrac",
    *(f"{name}_{tag}" for tag in VIEW_TAGS.values() for name in PER_VIEW_LOSS_METRICS),
    "grad_norm", "lr", "ema_rate", "math_verify_timeouts", "math_verify_errors", "step_seconds", *SYSTEM_FROM_VERL,
    "val_accuracy",
)  # fmt: skip
VAL_KEY = re.compile(r"^val-core/.+/acc/mean@\d+$")


def next_attempt_file(log_dir: str | Path) -> Path:
    """The file the next launch's verl tracker writes: ``attempt-NNN.jsonl``, numbered after the existing ones."""
    folder = Path(log_dir)
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"attempt-{len(list(folder.glob(ATTEMPT_GLOB))) + 1:03d}.jsonl"


def _number(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def to_ours(step: int, data: dict[str, Any]) -> dict[str, Any]:
    """One verl step record in our format; keys the record lacks are left out (validation-only steps)."""
    out: dict[str, Any] = {"step": step}
    for ours, theirs in FROM_VERL.items():
        if theirs in data:
            out[ours] = _number(data[theirs])
    for key in FROM_HOOK:
        if f"corewarding/{key}" in data:
            out[key] = _number(data[f"corewarding/{key}"])
    if "corewarding/reward_mean" in data:  # a training step: ema_rate is null when the teacher did not move
        out["ema_rate"] = data.get("corewarding/ema_rate")
    vals = [float(v) for k, v in data.items() if VAL_KEY.match(k)]
    if vals:
        out["val_accuracy"] = sum(vals) / len(vals)
    return {k: out[k] for k in ORDER if k in out}


def read_attempt(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """(step, data) per line; a torn last line (a killed run) is skipped, any other bad line is an error."""
    lines = path.read_text(encoding="utf-8").splitlines()
    records = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            if number == len(lines):
                break
            raise ValueError(f"{path}:{number}: not JSON ({exc})") from exc
        records.append((int(record["step"]), dict(record["data"])))
    return records


def _validation_only(data: dict[str, Any]) -> bool:
    return not any(k.startswith(("actor/", "corewarding/", "training/")) for k in data)


def merge_attempts(attempts: Iterable[list[tuple[int, dict[str, Any]]]]) -> dict[int, dict[str, Any]]:
    """Per step, verl's data; a later attempt replaces earlier ones from its first step on.

    A resumed attempt opens with the validation of the checkpoint it resumed from (verl's val_before_train),
    logged under the checkpoint's step: that record joins the earlier attempt's training record of the step.
    """
    merged: dict[int, dict[str, Any]] = {}
    for records in attempts:
        if not records:
            continue
        first = min(step for step, _ in records)
        merged = {s: d for s, d in merged.items() if s <= first}
        for step, data in records:
            joins = step == first and _validation_only(data)
            merged[step] = {**merged.get(step, {}), **data} if joins else data
    return merged


def missing_steps(merged: dict[int, dict[str, Any]]) -> list[int]:
    """Training steps below the last one with no training record: verl 0.9.1 logs a step's metrics after its save
    (``ray_trainer.py`` fit), so a run killed between the two resumes after that step and never logs it."""
    trained = {step for step, data in merged.items() if not _validation_only(data)}
    return sorted(set(range(1, max(trained, default=0) + 1)) - trained)


_REPORTED_GAPS: set[tuple[str, tuple[int, ...]]] = set()


def export_metrics(log_dir: str | Path, metrics_file: str | Path) -> int:
    """Rewrite ``metrics_file`` from every attempt's verl log (atomically); returns the rows written. A training step
    without a record is reported (once per process), never filled in."""
    attempts = [read_attempt(p) for p in sorted(Path(log_dir).glob(ATTEMPT_GLOB))]
    merged = merge_attempts(attempts)
    gaps = tuple(missing_steps(merged))
    if gaps and (str(metrics_file), gaps) not in _REPORTED_GAPS:
        _REPORTED_GAPS.add((str(metrics_file), gaps))
        log.warning(
            "%s: no metrics for step(s) %s: the run was stopped after saving them and before verl logged them "
            "(a resume does not repeat a saved step)", metrics_file, ", ".join(map(str, gaps)),
        )  # fmt: skip
    rows = [to_ours(step, merged[step]) for step in sorted(merged)]
    target = Path(metrics_file)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.writelines(json.dumps(row) + "\n" for row in rows)
    os.replace(tmp, target)
    return len(rows)
