"""The embedded default: every method of a matrix (``demo``: tiny model, tiny data, CPU) trained for a few steps."""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from corewarding.config import compose_config
from corewarding.matrix import load_matrix

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DemoRow:
    """One line of the demo's summary table (means over the training steps)."""

    method: str
    steps: int
    mean_reward: float
    label_accuracy: float | None
    mean_response_length: float
    val_accuracy: float | None
    seconds: float


def _mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def summarize_run(method: str, metrics: list[dict[str, Any]], seconds: float) -> DemoRow:
    steps = [m for m in metrics if m["step"] > 0]
    vals = [m["val_accuracy"] for m in metrics if m.get("val_accuracy") is not None]
    return DemoRow(
        method=method,
        steps=len(steps),
        mean_reward=_mean([m["reward_mean"] for m in steps]) or 0.0,
        label_accuracy=_mean([m.get("label_accuracy") for m in steps]),
        mean_response_length=_mean([m["response_length_mean"] for m in steps]) or 0.0,
        val_accuracy=vals[-1] if vals else None,
        seconds=seconds,
    )


def run_demo(
    matrix: str = "demo", runs_dir: str | Path = "runs/demo", overrides: Sequence[str] = (), progress: bool = True
) -> list[DemoRow]:
    """Train every cell of ``matrix`` with the local backend; fresh runs (earlier demo runs are replaced).

    Every cell's config is composed first, so a bad override fails in a second, before torch is imported.
    """
    spec = load_matrix(matrix)
    configs = [
        compose_config([*spec.overrides, *cell.overrides(), f"paths.runs_dir={runs_dir}", *overrides])
        for cell in spec.cells
    ]
    from corewarding.training.local import train

    rows = []
    for i, (cell, cfg) in enumerate(zip(spec.cells, configs, strict=True), start=1):
        run_dir = Path(runs_dir) / cell.cell_id
        _clear_checkpoints(run_dir)
        log.info("[%d/%d] %s", i, len(spec.cells), cell.cell_id)
        started = time.perf_counter()
        result = train(cfg, run_dir, progress=progress)
        rows.append(summarize_run(cell.method, result.metrics, time.perf_counter() - started))
    return rows


def _clear_checkpoints(run_dir: Path) -> None:
    """The demo always trains from scratch, so a rerun shows the same figures."""
    shutil.rmtree(run_dir / "checkpoints", ignore_errors=True)


def format_table(rows: Sequence[DemoRow]) -> str:
    """A plain-text table: method, steps, mean reward, label accuracy, mean response length, val accuracy, seconds."""
    header = ("method", "steps", "mean reward", "label acc", "mean resp len", "val acc", "seconds")

    def fmt(v: float | None, digits: int = 3) -> str:
        return "-" if v is None else f"{v:.{digits}f}"

    body = [
        (r.method, str(r.steps), fmt(r.mean_reward), fmt(r.label_accuracy), fmt(r.mean_response_length, 1),
         fmt(r.val_accuracy), fmt(r.seconds, 1))
        for r in rows
    ]  # fmt: skip
    return plain_table(header, body)


def plain_table(header: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    """Left-aligned columns under a dashed rule (the CLI's tables)."""
    widths = [max(len(h), *(len(row[i]) for row in body)) for i, h in enumerate(header)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in body]
    return "\n".join(lines)
