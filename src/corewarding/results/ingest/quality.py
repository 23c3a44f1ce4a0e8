"""Data-quality reports (``data/<dataset>/<name>.quality.json``) parsed into the store's quality tables.

A report: dataset, stage (prepare | rephrase | import-rephrased), split, source, output, rows_in, rows_out,
dropped {reason: count}, dropped_rows [{row, index, reason, detail}], flagged / flagged_rows (problems counted but
kept), for rephrase stages rejected {reason: count} and rejected_rows [{row, index, reason, attempts, action, detail}],
and counts {column: {value: count}}. Extra keys are kept in the stored JSON; a malformed report is an error naming the
file and the key.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPORT_GLOB = "*.quality.json"
REQUIRED = ("dataset", "stage", "rows_in", "rows_out", "dropped")
REPORT_COLUMNS = (
    "report_id",
    "path",
    "dataset",
    "stage",
    "split",
    "source",
    "output",
    "rows_in",
    "rows_out",
    "dropped_total",
    "rejected_total",
    "flagged_total",
    "report",
)  # the order of QualityReport.report
KINDS = ("dropped", "rejected", "flagged")  # rows left out; rephrasings rejected; problems counted but kept


class QualityReportError(ValueError):
    """A report that cannot be ingested; the message names the file."""


@dataclass
class QualityReport:
    """One report as rows of the four quality tables."""

    report: list[Any]
    reasons: list[tuple[str, str, str, int]]
    rows: list[tuple[Any, ...]]
    counts: list[tuple[str, str, str, int]]


def find_reports(data_dir: Path) -> list[Path]:
    if not data_dir.is_dir():
        raise FileNotFoundError(f"{data_dir}: no such folder")
    return sorted(data_dir.rglob(REPORT_GLOB))


def _count_map(value: Any, path: Path, key: str) -> dict[str, int]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value.values()):
        raise QualityReportError(f"{path}: {key} must map reasons to integer counts")
    return {str(k): int(v) for k, v in value.items()}


def _text(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, default=str)


def _row_entries(value: Any, path: Path, key: str, report_id: str, kind: str) -> list[tuple[Any, ...]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise QualityReportError(f"{path}: {key} must be a list")
    rows = []
    for position, entry in enumerate(value):
        if not isinstance(entry, dict) or "reason" not in entry:
            raise QualityReportError(f"{path}: {key}[{position}] must be an object with a reason")
        index = entry.get("index")
        if index is not None and (not isinstance(index, int | str) or isinstance(index, bool)):
            raise QualityReportError(f"{path}: {key}[{position}].index must be an integer or a string")
        attempts = entry.get("attempts")
        rows.append(
            (
                report_id,
                kind,
                position,
                _text(entry.get("row")),
                None if index is None else str(index),
                str(entry["reason"]),
                attempts if isinstance(attempts, int) else None,
                _text(entry.get("action")),
                _text(entry.get("detail")),
            )
        )
    return rows


def _counts(value: Any, path: Path, report_id: str) -> list[tuple[str, str, str, int]]:
    if value is None:
        return []
    if not isinstance(value, dict):
        raise QualityReportError(f"{path}: counts must map columns to {{value: count}}")
    out = []
    for column, values in value.items():
        for item, count in _count_map(values, path, f"counts.{column}").items():
            out.append((report_id, str(column), item, count))
    return out


def parse_report(path: Path, report_id: str) -> QualityReport:
    """Parse and check one report; ``report_id`` is its path relative to the data folder."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise QualityReportError(f"{path}: not a readable JSON file ({exc})") from exc
    if not isinstance(raw, dict):
        raise QualityReportError(f"{path}: not a JSON object")
    missing = [k for k in REQUIRED if k not in raw]
    if missing:
        raise QualityReportError(f"{path}: missing key(s) {', '.join(missing)}")
    for key in ("rows_in", "rows_out"):
        if not isinstance(raw[key], int) or isinstance(raw[key], bool) or raw[key] < 0:
            raise QualityReportError(f"{path}: {key} must be a non-negative integer")
    totals: dict[str, int] = {}
    reasons: list[tuple[str, str, str, int]] = []
    rows: list[tuple[Any, ...]] = []
    for kind in KINDS:
        counts = _count_map(raw.get(kind), path, kind)
        totals[kind] = sum(counts.values())
        reasons += [(report_id, kind, reason, count) for reason, count in counts.items()]
        rows += _row_entries(raw.get(f"{kind}_rows"), path, f"{kind}_rows", report_id, kind)
    report = [
        report_id,
        str(path),
        str(raw["dataset"]),
        str(raw["stage"]),
        _text(raw.get("split")),
        _text(raw.get("source")),
        _text(raw.get("output")),
        raw["rows_in"],
        raw["rows_out"],
        totals["dropped"],
        totals["rejected"],
        totals["flagged"],
        json.dumps(raw, sort_keys=True, default=str),
    ]
    return QualityReport(report, reasons, rows, _counts(raw.get("counts"), path, report_id))
