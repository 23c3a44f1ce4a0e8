"""Validate prepared rows and write what happened to them: the data-quality report of a set.

Every row that leaves is counted under a reason and listed with its source row number; a reason that is not
configured to drop is still counted (``flagged``) so nothing goes unnoticed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

DROP_REASONS = ("empty_question", "missing_ground_truth", "duplicate", "prompt_too_long")
COUNT_BY = ("level", "type", "subject", "source")


@dataclass
class Candidate:
    """A row on its way out: its source row number, the verl row, the question and the ground truth."""

    row: int
    record: dict[str, Any]
    question: str | None
    ground_truth: str | None


@dataclass
class QualityReport:
    """What a stage read, wrote and left out (the JSON the dashboard and ``dvc metrics`` read)."""

    dataset: str
    stage: str
    split: str
    source: str
    output: str
    rows_in: int = 0
    rows_out: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    flagged: dict[str, int] = field(default_factory=dict)
    dropped_rows: list[dict[str, Any]] = field(default_factory=list)
    flagged_rows: list[dict[str, Any]] = field(default_factory=list)
    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    prompt_tokens: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able dict; ``extra`` keys (e.g. a rephrase stage's rejections) sit at the top level."""
        data = {k: v for k, v in self.__dict__.items() if k != "extra"}
        data["dropped_total"] = sum(self.dropped.values())
        data.update(self.extra)
        return data

    def brief(self, report_file: str) -> dict[str, Any]:
        """The counts of :meth:`to_dict` without its per-row lists, and where the full report is (the CLI's stdout)."""
        return {
            "dataset": self.dataset,
            "stage": self.stage,
            "split": self.split,
            "rows_in": self.rows_in,
            "rows_out": self.rows_out,
            "dropped": {k: v for k, v in self.dropped.items() if v},
            "dropped_total": sum(self.dropped.values()),
            "flagged": {k: v for k, v in self.flagged.items() if v},
            **{k: self.extra[k] for k in ("rejected", "on_failure") if k in self.extra},
            "output": self.output,
            "report": report_file,
        }

    def summary(self) -> str:
        """One line for the terminal."""
        dropped = ", ".join(f"{k} {v}" for k, v in self.dropped.items() if v) or "none"
        flagged = ", ".join(f"{k} {v}" for k, v in self.flagged.items() if v)
        line = f"{self.dataset} [{self.stage}]: {self.rows_in} rows in, {self.rows_out} out; dropped: {dropped}"
        rejected = ", ".join(f"{k} {v}" for k, v in self.extra.get("rejected", {}).items())
        if rejected:
            line += f"; rejected rephrasings ({self.extra.get('on_failure')}): {rejected}"
        return line + (f"; flagged (kept): {flagged}" if flagged else "")


def _reason(candidate: Candidate, seen: set[tuple[str, str]]) -> tuple[str, str] | None:
    """The first problem of a row (reason, detail), or None."""
    if candidate.question is None or not candidate.question.strip():
        return "empty_question", "the question is missing or blank"
    if candidate.ground_truth is None or not candidate.ground_truth.strip():
        return "missing_ground_truth", "the ground truth is missing, blank or not extractable"
    key = (candidate.question, candidate.ground_truth)
    if key in seen:
        return "duplicate", "the same question and answer appeared in an earlier row"
    return None


def _counts(records: Iterable[dict[str, Any]]) -> dict[str, dict[str, int]]:
    counters: dict[str, Counter[str]] = {}
    for record in records:
        for key in COUNT_BY:
            value = record.get(key, record.get("extra_info", {}).get(key))
            if value is not None:
                counters.setdefault(key, Counter())[str(value)] += 1
    return {key: dict(sorted(counter.items())) for key, counter in counters.items()}


def validate(
    candidates: Sequence[Candidate],
    report: QualityReport,
    drop: Sequence[str],
    prompt_lengths: Callable[[list[dict[str, Any]]], list[int]] | None = None,
    max_prompt_tokens: int | None = None,
) -> list[dict[str, Any]]:
    """Return the rows to keep and fill ``report``; ``prompt_lengths`` maps verl rows to prompt token counts."""
    unknown = sorted(set(drop) - set(DROP_REASONS))
    if unknown:
        raise ValueError(f"validate.drop: unknown reason(s) {', '.join(unknown)}; known: {', '.join(DROP_REASONS)}")
    report.rows_in = len(candidates)
    report.dropped = dict.fromkeys(DROP_REASONS, 0)
    report.flagged = dict.fromkeys(DROP_REASONS, 0)
    seen: set[tuple[str, str]] = set()
    problems: dict[int, tuple[str, str]] = {}
    for i, candidate in enumerate(candidates):
        problem = _reason(candidate, seen)
        if problem is None:
            seen.add((str(candidate.question), str(candidate.ground_truth)))
        else:
            problems[i] = problem
    if prompt_lengths is not None and max_prompt_tokens is not None:
        checked = [i for i in range(len(candidates)) if i not in problems]
        lengths = prompt_lengths([candidates[i].record for i in checked])
        for i, length in zip(checked, lengths, strict=True):
            if length > max_prompt_tokens:
                problems[i] = ("prompt_too_long", f"{length} prompt tokens > {max_prompt_tokens}")
        report.prompt_tokens.update(checked=True, limit=max_prompt_tokens, max=max(lengths, default=0))
    else:
        report.prompt_tokens.update(checked=False)
    kept: list[dict[str, Any]] = []
    for i, candidate in enumerate(candidates):
        problem = problems.get(i)
        if problem is not None:
            reason, detail = problem
            entry = {"row": candidate.row, "index": candidate.record["extra_info"].get("index"), "reason": reason}
            entry["detail"] = detail
            if reason in drop:
                report.dropped[reason] += 1
                report.dropped_rows.append(entry)
                continue
            report.flagged[reason] += 1
            report.flagged_rows.append(entry)
        kept.append(candidate.record)
    report.rows_out = len(kept)
    report.counts = _counts(kept)
    return kept
