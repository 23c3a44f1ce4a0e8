"""Reads of the GPU-hour ledger (``runs.gpu_hours`` and friends, schema v6) and of measured step times.

Every run in the store counts, finished or not: a failed or superseded run held its devices too. A run whose
``run.json`` predates the ledger has NULL figures and is counted in ``unrecorded``, never as zero hours. Pure
functions of a read-only DuckDB connection; every value reaches SQL as a bound parameter.
"""

from __future__ import annotations

from collections.abc import Sequence

import duckdb
import pandas as pd

from corewarding.matrix import load_matrix

Con = duckdb.DuckDBPyConnection

GROUPS = {"method": "method", "base_model": "base_model", "dataset": "dataset", "cell": "cell_id"}


def _where(cell_ids: Sequence[str] | None) -> tuple[str, list[object]]:
    return "(? OR list_contains(?, cell_id))", [cell_ids is None, list(cell_ids or [])]


def gpu_hours(
    con: Con, by: Sequence[str] = ("method", "base_model"), cell_ids: Sequence[str] | None = None
) -> pd.DataFrame:
    """Measured GPU-hours summed per group (``by``: method, base_model, dataset, cell), over the runs of
    ``cell_ids`` (None: every run): runs, runs without a ledger, wall hours, device-hours and GPU-hours."""
    unknown = [b for b in by if b not in GROUPS]
    if unknown or not by:
        raise ValueError(f"by={list(by)}: each must be one of {', '.join(GROUPS)}")
    columns = ", ".join(GROUPS[b] + (f" AS {b}" if GROUPS[b] != b else "") for b in by)
    where, params = _where(cell_ids)
    return con.execute(
        f"""SELECT {columns}, count(*) AS runs, count(*) FILTER (WHERE gpu_hours IS NULL) AS unrecorded,
            round(sum(wall_seconds) / 3600, 4) AS wall_hours, round(sum(device_hours), 4) AS device_hours,
            round(sum(gpu_hours), 4) AS gpu_hours,
            string_agg(DISTINCT device_type, ',' ORDER BY device_type) AS device_types
        FROM runs WHERE {where}
        GROUP BY ALL ORDER BY ALL""",
        params,
    ).fetchdf()


def matrix_gpu_hours(con: Con, matrix: str) -> dict[str, str | float | int]:
    """The ledger's totals over the runs of a matrix's cells (configs/matrix/NAME.yaml)."""
    cell_ids = [cell.cell_id for cell in load_matrix(matrix).cells]
    row = con.execute(
        """SELECT count(*), count(*) FILTER (WHERE gpu_hours IS NULL), count(DISTINCT cell_id),
            coalesce(sum(device_hours), 0), coalesce(sum(gpu_hours), 0)
        FROM runs WHERE list_contains(?, cell_id)""",
        [cell_ids],
    ).fetchone()
    assert row is not None  # an aggregate always returns a row
    return {
        "matrix": matrix,
        "cells": len(cell_ids),
        "cells_run": int(row[2]),
        "runs": int(row[0]),
        "unrecorded": int(row[1]),
        "device_hours": round(float(row[3]), 4),
        "gpu_hours": round(float(row[4]), 4),
    }


def phase_hours(con: Con, cell_ids: Sequence[str] | None = None) -> pd.DataFrame:
    """verl's phases summed over the runs of ``cell_ids`` (None: all): seconds, device-hours, GPU-hours."""
    where, params = _where(cell_ids)
    return con.execute(
        f"""SELECT p.phase, round(sum(p.seconds), 3) AS seconds, round(sum(p.device_hours), 4) AS device_hours,
            round(sum(p.gpu_hours), 4) AS gpu_hours
        FROM run_phase_hours p JOIN runs r USING (run_id) WHERE {where.replace("cell_id", "r.cell_id")}
        GROUP BY p.phase ORDER BY gpu_hours DESC, device_hours DESC, p.phase""",
        params,
    ).fetchdf()


def step_times(con: Con) -> pd.DataFrame:
    """Measured training step times (the ``step_seconds`` metric), one row per run: its cell's method, base model
    and data set, backend, the devices it held (NULL without a ledger), its config (JSON, to scale by), the steps
    measured and their mean seconds."""
    return con.execute(
        """SELECT r.run_id, r.method, r.base_model, r.dataset, r.backend, r.device_type, r.devices, r.config,
            count(*) AS steps, avg(m.value) AS step_seconds
        FROM training_metrics m JOIN runs r USING (run_id)
        WHERE m.metric = 'step_seconds' AND m.value > 0
        GROUP BY ALL ORDER BY r.run_id"""
    ).fetchdf()
