"""What a pipeline run did per cell and step, which cells failed and why, and a table of their results."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from corewarding import methods
from corewarding.matrix import parse_cell_id
from corewarding.run_folder import EVAL_METRICS, metrics_file, released_dir
from corewarding.tiny import PLUMBING_CHECK
from corewarding.training.run_record import read_record

CELL_STEPS = ("train", "evaluate", "ingest", "publish")
AUDIT_STEP = "audit"  # corewarding audit's step: shown, with the released checkpoint's score, when a run has it


@dataclass
class CellReport:
    """One cell: each step's status (done, skipped, failed, not run) and the first error."""

    cell_id: str
    run_dir: str
    steps: dict[str, str] = field(default_factory=dict)
    error: str | None = None
    worker: str | None = None  # where its flow run ran (a work pool's worker), None when in the parent's process
    flow_run_id: str | None = None  # the flow run that wrote it: the parent takes only its own runs' reports
    attempt: str | None = None  # the flow run's name: <cell> or <cell>#<n> when started again
    config_hash: str | None = None  # the resolved training config and code it ran with
    code_version: str | None = None

    def record(self, step: str, status: str, error: str | None = None) -> None:
        self.steps[step] = status
        if error and self.error is None:
            self.error = f"{step}: {error}"

    @property
    def failed(self) -> bool:
        return self.error is not None


@dataclass
class PipelineReport:
    """The whole run: the matrix, the data stages reproduced, each cell, and the DVC stages recorded."""

    matrix: str
    cells: list[CellReport]
    data_stages: list[str] = field(default_factory=list)
    recorded: list[str] = field(default_factory=list)
    dvc_error: str | None = None  # recording the stages failed (the cells' own results stand)

    @property
    def failed(self) -> list[CellReport]:
        return [c for c in self.cells if c.failed]

    @property
    def ok(self) -> bool:
        return not self.failed and self.dvc_error is None

    def ran(self, step: str) -> list[str]:
        """The cells whose ``step`` did its work in this run (not skipped): their DVC stages are recorded."""
        return [c.cell_id for c in self.cells if c.steps.get(step) == "done"]

    def skipped(self, step: str) -> list[str]:
        """The cells whose ``step`` was found done already (by an earlier run, which may have stopped before it
        recorded the stage)."""
        return [c.cell_id for c in self.cells if c.steps.get(step) == "skipped"]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PipelineReport:
        """Inverse of ``to_dict`` (a flow run's return value)."""
        cells = [CellReport(**c) for c in data["cells"]]
        return cls(data["matrix"], cells, list(data["data_stages"]), list(data["dvc_recorded"]), data.get("dvc_error"))

    def to_dict(self) -> dict[str, Any]:
        return {
            "matrix": self.matrix,
            "data_stages": self.data_stages,
            "cells": [c.__dict__ for c in self.cells],
            "failed": [c.cell_id for c in self.failed],
            "dvc_recorded": self.recorded,
            "dvc_error": self.dvc_error,
        }


class CellFailed(RuntimeError):
    """Raised at the end of a cell's flow run in which a step failed (its report says which)."""

    def __init__(self, report: CellReport) -> None:
        self.report = report
        super().__init__(f"{report.cell_id}: {report.error}")


class PipelineFailed(RuntimeError):
    """Raised at the end of a run in which some cells failed (the others ran to the end)."""

    def __init__(self, report: PipelineReport) -> None:
        self.report = report
        reasons = "; ".join(f"{c.cell_id} ({c.error})" for c in report.failed)
        message = f"{len(report.failed)} of {len(report.cells)} cell(s) failed: {reasons}" if report.failed else ""
        if report.dvc_error:
            message = "; ".join(filter(None, [message, f"recording the DVC stages failed: {report.dvc_error}"]))
        super().__init__(message)


def _training_summary(run_dir: Path) -> dict[str, Any]:
    """Means over the training steps (as the demo's table), read with the results store's metrics reader."""
    from corewarding.results.ingest.runs import read_metrics  # pandas: imported when used

    path = metrics_file(run_dir)
    if not path.is_file():
        return {}
    frame = read_metrics(path, allow_partial_tail=True)
    rows = [{"step": int(step), **dict(zip(g["metric"], g["value"], strict=True))} for step, g in frame.groupby("step")]
    summary = summarize_run("", rows, 0.0)
    vals = [r["val_accuracy"] for r in rows if r.get("val_accuracy") is not None]
    return {
        "mean reward": summary.mean_reward,
        "label acc": summary.label_accuracy,
        "val acc": summary.val_accuracy,
        "val acc at start": vals[0] if len(vals) > 1 else None,  # step 0: the base model, before any update
    }


def reward_unit(cell_id: str) -> str:
    """What a cell's mean reward is measured in (``methods.reward_unit`` of its method); ``?`` for a cell id that
    names no known method."""
    try:
        return methods.reward_unit(parse_cell_id(cell_id).method)
    except ValueError:
        return "?"


def _attempt_number(cell: CellReport) -> str:
    """``1`` for a cell's first run, ``n`` for its n-th (the flow run is named ``<cell>#<n>``)."""
    if not cell.attempt:
        return "-"
    _, _, number = cell.attempt.rpartition("#")
    return number if number.isdigit() else "1"


@dataclass(frozen=True)
class Headline:
    """A run's first metric at its newest evaluated step, with its 95% bootstrap interval when stored."""

    label: str  # ``<benchmark> <metric> @<step>`` (no step for a released checkpoint)
    value: float
    low: float | None = None
    high: float | None = None

    def text(self, interval: bool = False) -> str:
        """``<label> = v``, with `` [low, high]`` when asked for and stored."""
        shown = f"{self.label} = {self.value:.3f}"
        if interval and self.low is not None and self.high is not None:
            shown += f" [{self.low:.3f}, {self.high:.3f}]"
        return shown


def _headline_metric(run_dir: Path, released: bool = False) -> Headline | None:
    """The first metric of the newest evaluated step (math-verify checker when present); ``released``: of an audited
    released checkpoint's folder (one model, no step)."""
    import pandas as pd  # pandas: imported when used

    path = run_dir / EVAL_METRICS
    if not path.is_file():
        return None
    frame = pd.read_parquet(path)  # a few rows per step; an older file has no interval columns
    frame = frame if released else frame.dropna(subset=["step"])
    if frame.empty:
        return None
    if not released:
        frame = frame[frame["step"] == frame["step"].max()]
    preferred = frame[frame["checker"] == "math_verify"]
    row = (preferred if not preferred.empty else frame).iloc[0]
    label = f"{row['benchmark']} {row['metric']}"
    low, high = row.get("ci_low"), row.get("ci_high")
    low, high = (None, None) if low is None or high is None or pd.isna(low) or pd.isna(high) else (low, high)
    return Headline(
        label if released else f"{label} @{int(row['step'])}", float(row["value"]),
        None if low is None else float(low), None if high is None else float(high),
    )  # fmt: skip


def format_report(report: PipelineReport) -> str:
    """A plain table: each cell's step statuses, its training means and its evaluation headline."""

    def fmt(value: object) -> str:
        return "-" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)

    workers = any(cell.worker or _attempt_number(cell) not in ("1", "-") for cell in report.cells)  # a pool's run
    audited = any(AUDIT_STEP in cell.steps for cell in report.cells)  # corewarding audit: its step and released score
    steps = (*CELL_STEPS, AUDIT_STEP) if audited else CELL_STEPS
    header = [
        "cell",
        *steps,
        "mean reward",
        "unit",
        "label acc",
        "val acc",
        "evaluation (newest step, 95% CI)",
        *(["released"] if audited else []),
        *(["attempt", "worker"] if workers else []),
    ]
    body = []
    for cell in report.cells:  # a failed cell's own columns stay empty: its folder's figures are not this attempt's
        train = {} if cell.failed else _training_summary(Path(cell.run_dir))
        headline = None if cell.failed else _headline_metric(Path(cell.run_dir))
        shown = headline.text(interval=True) if headline else "-"
        released = _headline_metric(released_dir(Path(cell.run_dir)), released=True) if audited else None
        start, last = train.get("val acc at start"), train.get("val acc")
        val = f"{fmt(start)}->{fmt(last)}" if start is not None and last is not None else fmt(last)
        body.append(
            [cell.cell_id, *(cell.steps.get(s, "-") for s in steps)]
            + [fmt(train.get("mean reward")), "-" if cell.failed else reward_unit(cell.cell_id)]
            + [fmt(train.get("label acc")), val]
            + [shown]
            + ([released.text() if released else "-"] if audited else [])
            + ([_attempt_number(cell), cell.worker or "-"] if workers else [])
        )
    lines = [plain_table(header, body)]
    if report.cells and all(_is_tiny(cell.cell_id) for cell in report.cells):
        lines.append(TINY_NOTE)
    for cell in report.failed:
        lines.append(f"FAILED {cell.cell_id}: {cell.error}")
        earlier = _earlier_figures(Path(cell.run_dir))
        if earlier:
            lines.append(f"  {earlier}")
    if report.dvc_error:
        lines.append(f"FAILED recording the DVC stages: {report.dvc_error}")
    return "\n".join(lines)


UNITS_NOTE = "; ".join(f"{unit} = {meaning}" for unit, meaning in methods.REWARD_UNITS.items())
TINY_NOTE = f"""
{PLUMBING_CHECK} val acc: step 0 (the base model) -> the last
step. unit: {UNITS_NOTE}."""


def _is_tiny(cell_id: str) -> bool:
    try:
        return parse_cell_id(cell_id).base_model == "tiny"
    except ValueError:
        return False


def _earlier_figures(run_dir: Path) -> str | None:
    """What a failed cell's run folder still holds, labelled as the earlier run's (its config hash and status), for
    the line under the table; None when it holds no figures."""
    train = {k: v for k, v in _training_summary(run_dir).items() if v is not None}
    headline = _headline_metric(run_dir)
    figures = [f"{k} {v:.3f}" for k, v in train.items()] + ([headline.text()] if headline else [])
    if not figures:
        return None
    record = read_record(run_dir) or {}
    config, status = record.get("config_hash") or "unknown", record.get("status") or "unknown"
    held = ", ".join(figures)
    return f"not this attempt's result: {run_dir} holds a previous run (config {config}, {status}): {held}"


def cell_markdown(cell: CellReport) -> str:
    """The cell's steps, training means and evaluation metrics as a markdown table (the Prefect UI's artifact)."""
    import pandas as pd  # pandas: imported when used

    run_dir = Path(cell.run_dir)
    lines = [f"### {cell.cell_id}", "", "| | |", "|---|---|"]
    lines += [f"| {step} | {status} |" for step, status in cell.steps.items()]
    lines += [f"| {name} | {value:.4f} |" for name, value in _training_summary(run_dir).items() if value is not None]
    if cell.error:
        lines.append(f"| error | {cell.error.replace('|', '/')[:300]} |")
    path = run_dir / EVAL_METRICS
    if path.is_file():
        frame = pd.read_parquet(path, columns=["step", "benchmark", "checker", "metric", "value"]).dropna(
            subset=["step"]
        )
        if not frame.empty:
            newest = frame[frame["step"] == frame["step"].max()]
            step = int(newest["step"].iloc[0])
            lines += ["", f"Evaluation at step {step}:", "", "| benchmark | checker | metric | value |"]
            lines.append("|---|---|---|---|")
            lines += [
                f"| {r.benchmark} | {r.checker} | {r.metric} | {r.value:.4f} |" for r in newest.itertuples(index=False)
            ]
    return "\n".join(lines) + "\n"


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
