"""What a rephrasing run (or an imported release) leaves behind: aligned parquets, the pair file and the report."""

from __future__ import annotations

import copy
from collections import Counter
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from corewarding.data.prepare import report_path
from corewarding.data.quality import QualityReport
from corewarding.files import atomic_path, write_json_atomic, write_parquet_atomic
from corewarding.rows import ground_truth_of, question_of

ON_FAILURE = ("keep_original", "drop")


@dataclass(frozen=True)
class RephrasePaths:
    """The files of one set's rephrasing, named after its prepared parquet (``train`` -> ``train_rephrased``)."""

    rephrased: Path
    original: Path
    pairs: Path
    raw: Path

    @classmethod
    def beside(cls, prepared: Path) -> RephrasePaths:
        stem = prepared.name.removesuffix(".parquet")
        return cls(
            rephrased=prepared.with_name(f"{stem}_rephrased.parquet"),
            original=prepared.with_name(f"{stem}_original.parquet"),
            pairs=prepared.with_name(f"{stem}_pairs.parquet"),
            raw=prepared.with_name(f"{stem}_rephrase_raw.jsonl"),
        )

    @property
    def report(self) -> Path:
        return report_path(self.rephrased)


@dataclass(frozen=True)
class Outcome:
    """The end of one row: the accepted rewrite, or the failure of its last attempt."""

    rewrite: str | None
    reason: str | None = None
    detail: str = ""
    attempts: int = 1
    flags: tuple[tuple[str, str], ...] = ()


def _with_question(row: dict[str, Any], question: str) -> dict[str, Any]:
    new = copy.deepcopy(row)
    for message in new["prompt"]:
        if message["role"] == "user":
            message["content"] = question
    return new


def _pair(row: dict[str, Any], rephrased: dict[str, Any]) -> dict[str, Any]:
    info = row.get("extra_info") or {}
    return {
        "idx": info.get("index"),
        "original_question": question_of(row),
        "rephrased_question": question_of(rephrased),
        "solution": ground_truth_of(row),
        "level": row.get("level", info.get("level")),
        "type": row.get("type", info.get("type")),
        "original_message": row["prompt"],
        "rephrased_message": rephrased["prompt"],
    }


def write_outputs(
    rows: list[dict[str, Any]], outcomes: list[Outcome], paths: RephrasePaths, report: QualityReport, on_failure: str
) -> QualityReport:
    """Write the aligned original/rephrased parquets, the pair file and the report (each atomically)."""
    if on_failure not in ON_FAILURE:
        raise ValueError(f"rephrase.on_failure={on_failure!r}: expected one of {', '.join(ON_FAILURE)}")
    originals, rephrased, pairs, rejected_rows, flagged_rows = [], [], [], [], []
    for i, (row, outcome) in enumerate(zip(rows, outcomes, strict=True)):
        index = (row.get("extra_info") or {}).get("index")
        flagged_rows += [{"row": i, "index": index, "reason": r, "detail": d} for r, d in outcome.flags]
        if outcome.rewrite is None:
            action = "kept_original" if on_failure == "keep_original" else "dropped"
            rejected_rows.append(
                {"row": i, "index": index, "reason": outcome.reason, "attempts": outcome.attempts}
                | {"action": action, "detail": outcome.detail}
            )
            if on_failure == "drop":
                continue
        new = _with_question(row, outcome.rewrite if outcome.rewrite is not None else question_of(row))
        originals.append(row)
        rephrased.append(new)
        pairs.append(_pair(row, new))
    report.rows_in = report.rows_in or len(rows)
    report.rows_out = len(rephrased)
    report.dropped["rephrase_rejected"] = len(rows) - len(rephrased)
    report.dropped_rows += [r for r in rejected_rows if r["action"] == "dropped"]
    for reason, count in Counter(str(r["reason"]) for r in flagged_rows).items():
        report.flagged[reason] = report.flagged.get(reason, 0) + count
    report.flagged_rows += flagged_rows
    report.extra.update(
        on_failure=on_failure,
        rejected=dict(Counter(str(r["reason"]) for r in rejected_rows)),
        rejected_rows=rejected_rows,
    )
    if not rephrased:
        raise ValueError(f"{paths.rephrased}: every pair was dropped ({report.summary()})")
    # Everything is written to temporary files first and renamed together, so a failure leaves the old set whole.
    with ExitStack() as stack:
        temps = {
            name: stack.enter_context(atomic_path(getattr(paths, name))) for name in ("original", "rephrased", "pairs")
        }
        for name, data in (("original", originals), ("rephrased", rephrased), ("pairs", pairs)):
            write_parquet_atomic(data, temps[name])
        write_json_atomic(report.to_dict(), paths.report)
    return report
