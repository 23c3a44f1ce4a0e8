"""The full-matrix preview's store: synthetic runs live in a store of their own, never in the real one.

``corewarding results synthetic --out DIR`` writes ``DIR/runs``, ``DIR/data`` and ingests them into
``DIR/results.duckdb``; the dashboard and the report open it with ``--db DIR/results.duckdb``. Ingesting synthetic
runs into the default store is refused, and ``corewarding results forget-synthetic`` removes any that an older
recipe put there.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path

from corewarding.results.ingest.ingestion import ingest
from corewarding.results.ingest.quality_rows import drop_report
from corewarding.results.ingest.run_folders import find_run_dirs
from corewarding.results.ingest.run_rows import drop_run
from corewarding.results.ingest.sources import transaction
from corewarding.results.store.store import writer
from corewarding.run_folder import RUN_RECORD

log = logging.getLogger(__name__)

SYNTHETIC = "synthetic"  # the backend a synthetic run records (synthetic/folders.py)
PREVIEW_DB = "results.duckdb"


def is_synthetic(run_dir: Path) -> bool:
    """Whether the run folder's record says a synthetic backend wrote it."""
    try:
        record = json.loads((run_dir / RUN_RECORD).read_text())
    except (OSError, ValueError):
        return False
    return isinstance(record, dict) and record.get("backend") == SYNTHETIC


def synthetic_runs(roots: Sequence[Path], run_dirs: Sequence[Path] = ()) -> list[Path]:
    """The synthetic run folders among those under ``roots`` and ``run_dirs``."""
    folders = [d for root in roots if root.is_dir() for d in find_run_dirs(root)] + list(run_dirs)
    return [d for d in folders if is_synthetic(d)]


def ingest_preview(out: Path) -> Path:
    """Ingest ``out/runs`` and ``out/data`` into the preview's own store, ``out/results.duckdb``; returns it."""
    db = out / PREVIEW_DB
    ingest(db, [out / "runs"], [], [out / "data"] if (out / "data").is_dir() else [])
    return db


def forget_synthetic(db: Path) -> dict[str, int]:
    """Remove every synthetic run (and the quality reports read from beside their runs folder) from the store at
    ``db`` in one transaction; returns how many runs and reports were removed."""
    with writer(db) as con:
        rows = con.execute("SELECT run_id, run_dir FROM runs WHERE backend = ?", [SYNTHETIC]).fetchall()
        data_dirs = sorted({str(Path(run_dir).parent.parent / "data") for _, run_dir in rows if run_dir})
        reports = [
            owner
            for data in data_dirs
            for (owner,) in con.execute(
                "SELECT owner FROM sources WHERE kind = 'quality' AND starts_with(path, ?)", [data + "/"]
            ).fetchall()
        ]

        def body() -> None:
            for run_id, _ in rows:
                drop_run(con, run_id)
            for owner in reports:
                drop_report(con, owner)
                con.execute("DELETE FROM sources WHERE owner = ?", [owner])

        transaction(con, body)
    log.info("%s: removed %d synthetic run(s) and %d quality report(s)", db, len(rows), len(reports))
    return {"runs": len(rows), "quality_reports": len(reports)}
