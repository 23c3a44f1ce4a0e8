"""The report's section on what the matrix's runs cost: measured GPU-hours (the runs' ``run.json`` ledger) per method
and base model, and the matrix's total, with the command whose estimate sits beside it (the pipeline's dry run).
Every text from the store is escaped."""

from __future__ import annotations

from collections.abc import Mapping
from html import escape

import pandas as pd

from corewarding.results.report.markup import num, table

# hours to 3 decimals: a CPU run of the demo holds its device for seconds (0.003 h), a paper cell for days
HEADERS = ["method", "base model", "runs", "without a ledger", "wall hours", "device-hours", "GPU-hours", "devices"]


def _rows(frame: pd.DataFrame) -> list[tuple[list[str], str]]:
    return [
        ([escape(str(r.method)), escape(str(r.base_model)), num(r.runs), num(r.unrecorded), num(r.wall_hours, 3),
          num(r.device_hours, 3), num(r.gpu_hours, 3), escape(str(r.device_types or "–"))], "")
        for r in frame.itertuples()
    ]  # fmt: skip


def cost_section(by_group: pd.DataFrame, total: Mapping[str, object]) -> str:
    """``by_group``: ``ledger.gpu_hours`` by method and base model over the matrix's cells; ``total``:
    ``ledger.matrix_gpu_hours``. Empty when the matrix has no run in the store."""
    if not len(by_group):
        return ""
    matrix = escape(str(total["matrix"]))
    unrecorded = int(total["unrecorded"])  # type: ignore[call-overload]  # matrix_gpu_hours counts it: an int
    missing = (
        f" {unrecorded} run(s) predate the ledger and are counted apart, never as zero hours." if unrecorded else ""
    )
    return (
        '<h2 id="gpu-hours">GPU-hours (measured)</h2>'
        f"<p>Matrix {matrix}: {num(total['gpu_hours'], 3)} GPU-hours "
        f"({num(total['device_hours'], 3)} device-hours) over "
        f"{num(total['runs'])} run(s) of {num(total['cells_run'])} of its {num(total['cells'])} cells, failed and "
        f"superseded runs included (they held their devices too).{missing} Device-hours are devices x wall time; "
        "GPU-hours count the CUDA devices only. The estimate for the cells still to run, beside what is already "
        f"spent: <code>corewarding pipeline run --matrix {matrix} --dry-run</code>.</p>"
        + table(HEADERS, _rows(by_group))
    )
