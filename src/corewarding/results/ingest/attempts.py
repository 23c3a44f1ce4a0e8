"""Each pipeline attempt at a cell in the results store (``cell_attempts``), and which cells' newest attempt failed.

A failed attempt trains and evaluates nothing new, so it leaves no run row: without this record the store would keep
showing the cell's older finished run, trained under another config, as the cell's result. The pipeline records every
attempt it ingests (finished or failed, with why); a cell whose newest attempt failed is FAILED for the config that
attempt ran, and its newest stored run is shown only as what it is: a run of that config or of an earlier one.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pandas as pd

from corewarding.files import disk_full
from corewarding.results.ingest.ingestion import StoreFullError
from corewarding.results.store.store import default_db, first_line, writer

FINISHED, FAILED = "finished", "failed"
COLUMNS = ("attempt_id", "cell_id", "config_hash", "attempt", "status", "reason", "recorded_at")


@dataclass(frozen=True)
class CellAttempt:
    """One attempt at a cell: its training config hash, flow run name, ``finished`` or ``failed`` and why."""

    cell_id: str
    config_hash: str | None
    status: str
    reason: str | None = None
    attempt: str | None = None  # the flow run's name: <cell>, or <cell>#<n> when started again
    attempt_id: str = field(default_factory=lambda: uuid.uuid4().hex)  # the flow run's id when it has one
    recorded_at: datetime = field(default_factory=lambda: datetime.now(UTC).replace(tzinfo=None))

    def row(self) -> list[object]:
        return [getattr(self, name) for name in COLUMNS]


def record_attempt(attempt: CellAttempt, db: str | Path | None = None, timeout: float = 300.0) -> None:
    """Write the attempt's row (replacing an earlier write of the same attempt); a full disk: StoreFullError."""
    if attempt.status not in (FINISHED, FAILED):
        raise ValueError(f"attempt status {attempt.status!r}: {FINISHED} or {FAILED}")
    path = Path(db) if db is not None else default_db()
    placeholders = ", ".join("?" * len(COLUMNS))
    try:
        with writer(path, timeout=timeout) as con:
            con.execute(f"INSERT OR REPLACE INTO cell_attempts ({', '.join(COLUMNS)}) VALUES ({placeholders})",
                        attempt.row())  # fmt: skip
    except (duckdb.Error, OSError) as exc:
        if not disk_full(exc):
            raise
        raise StoreFullError(
            f"{path}: disk full while recording {attempt.cell_id}'s {attempt.status} attempt ({first_line(exc)})"
        ) from None


_FAILED_SQL = """
WITH latest AS (
    SELECT * FROM cell_attempts WHERE ($all OR list_contains($cells, cell_id))
    QUALIFY row_number() OVER (PARTITION BY cell_id ORDER BY recorded_at DESC, attempt_id DESC) = 1),
stored AS (
    SELECT cell_id, run_id, config_hash, status FROM runs
    QUALIFY row_number() OVER (PARTITION BY cell_id ORDER BY started_at DESC NULLS LAST, run_id) = 1)
SELECT l.cell_id, l.config_hash, l.attempt, l.reason, l.recorded_at AS failed_at, s.run_id AS stored_run_id,
    s.config_hash AS stored_config_hash, s.status AS stored_status,
    CASE WHEN s.run_id IS NULL THEN NULL
        WHEN s.config_hash IS NOT DISTINCT FROM l.config_hash THEN 'this config' ELSE 'an earlier config' END
        AS stored_run_from
FROM latest l LEFT JOIN stored s USING (cell_id) WHERE l.status = 'failed' ORDER BY l.cell_id
"""


def failed_cells(con: duckdb.DuckDBPyConnection, cell_ids: Sequence[str] | None = None) -> pd.DataFrame:
    """The cells (of ``cell_ids``; None: all) whose newest attempt failed: its config hash, attempt, reason and time,
    and the cell's newest stored run with the config it is from (``this config`` or ``an earlier config``)."""
    params = {"all": cell_ids is None, "cells": list(cell_ids or [])}
    return con.execute(_FAILED_SQL, params).fetchdf()


def failure_note(row: Mapping[str, object]) -> str:
    """One line for a row of ``failed_cells``: FAILED for which config and why, and what the stored run is."""
    config = row.get("config_hash") or "unknown"
    note = f"FAILED for config {config} (attempt {row.get('attempt') or '?'}): {row.get('reason') or 'no reason given'}"
    run = row.get("stored_run_id")
    if isinstance(run, str) and run:
        note += f"; its stored run {run} ({row.get('stored_status')}) is from {row.get('stored_run_from')}"
        if row.get("stored_run_from") != "this config":
            note += f" ({row.get('stored_config_hash') or 'unknown'})"
    return note
