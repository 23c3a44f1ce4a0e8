"""The record of one audited released checkpoint (``runs/<cell_id>/released/audit.json``), read and written.

An audit evaluates the Hub checkpoint the paper released for a cell; its scores are stored apart from the cell's
reproduction runs under the run id ``released/<cell_id>`` (eval_metrics.source = ``released``).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from corewarding.files import write_json_atomic
from corewarding.matrix import PLAIN_NAME_RULE, hub_repo_id, is_plain_name, parse_cell_id
from corewarding.run_folder import AUDIT_RECORD, RELEASED

STATUSES = ("running", "done", "failed")
REQUIRED = ("cell_id", "method", "base_model", "dataset", "hub_repo_id", "status")


class AuditRecordError(ValueError):
    """An audit record that cannot be read; the message names the file and the key."""


@dataclass
class ReleasedRecord:
    """One cell's released checkpoint: its Hub repo and the revision evaluated, and how the audit ended."""

    cell_id: str
    method: str
    base_model: str
    dataset: str
    hub_repo_id: str
    status: str = "running"
    revision: str | None = None  # the Hub commit evaluated (pinned by the first audit, reused by later ones)
    error: str | None = None
    audited_at: str | None = None  # ISO time the audit ended
    benchmarks: list[str] | None = None
    settings_sha256: str | None = None  # of the benchmarks and resolved settings a finished audit used
    throughput: dict[str, Any] | None = None  # what its generation measured: backend, samples, tokens, seconds

    @property
    def run_id(self) -> str:
        return released_run_id(self.cell_id)

    def write(self, folder: Path) -> None:
        write_json_atomic(asdict(self), Path(folder) / AUDIT_RECORD)


def released_run_id(cell_id: str) -> str:
    """The run id the store keeps a cell's released-checkpoint scores under.

    >>> released_run_id("gt_grpo__qwen3-4b-base__math")
    'released/gt_grpo__qwen3-4b-base__math'
    """
    return f"{RELEASED}/{cell_id}"


def read_record(folder: Path) -> ReleasedRecord:
    """The record in ``folder`` (a ``released/`` folder); AuditRecordError names the file and what is wrong."""
    path = Path(folder) / AUDIT_RECORD
    try:
        values: Any = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise AuditRecordError(f"{path}: cannot read ({exc})") from exc
    except ValueError as exc:
        raise AuditRecordError(f"{path}: not JSON ({exc})") from exc
    if not isinstance(values, dict):
        raise AuditRecordError(f"{path}: expected a JSON object")
    missing = [k for k in REQUIRED if not isinstance(values.get(k), str) or not values[k]]
    if missing:
        raise AuditRecordError(f"{path}: missing or empty key(s) {', '.join(missing)}")
    odd = [k for k in ("cell_id", "method", "base_model", "dataset") if not is_plain_name(values[k])]
    if odd:  # the matrix's rule: no bidi control, invisible or look-alike character
        raise AuditRecordError(f"{path}: {odd[0]}={values[odd[0]]!r} is not a plain name ({PLAIN_NAME_RULE})")
    if values["status"] not in STATUSES:
        raise AuditRecordError(f"{path}: status {values['status']!r} is not one of {', '.join(STATUSES)}")
    known = {f.name for f in fields(ReleasedRecord)}
    return ReleasedRecord(**{k: v for k, v in values.items() if k in known})


def check_matrix_repo(record: ReleasedRecord, folder: Path) -> None:
    """Raise AuditRecordError unless the record names the repository the matrix names for its cell (a record can
    credit scores to no other: a tampered ``audit.json`` naming another repository is not ingested)."""
    path = Path(folder) / AUDIT_RECORD
    try:
        expected = hub_repo_id(parse_cell_id(record.cell_id))
    except (ValueError, KeyError, OSError) as exc:
        raise AuditRecordError(f"{path}: cell {record.cell_id!r} is not a cell of this checkout's configs") from exc
    if record.hub_repo_id != expected:
        raise AuditRecordError(f"{path}: names {record.hub_repo_id}, the matrix names {expected} for {record.cell_id};"
                               " audit it again (corewarding audit)")  # fmt: skip


def find_released(root: Path) -> list[Path]:
    """Every ``released/`` folder with an audit record at or under ``root`` (hidden folders skipped)."""
    return sorted(
        p.parent
        for p in Path(root).rglob(AUDIT_RECORD)
        if p.parent.name == RELEASED and not any(part.startswith(".") for part in p.relative_to(root).parts)
    )
