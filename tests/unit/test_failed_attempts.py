"""Failures are recorded, never covered (issue 32): the store keeps each pipeline attempt at a cell, a cell whose
newest attempt failed is FAILED for that attempt's config (its older run labelled as another config's), and the
pipeline's table never shows a failed cell's folder figures in the cell's own columns."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from corewarding.pipeline.run_summary import CellReport, PipelineReport, format_report
from corewarding.results.ingest.attempts import CellAttempt, failed_cells, failure_note, record_attempt
from corewarding.results.store import schema
from corewarding.results.store.store import reader, writer

CELL = "gt_grpo__tiny__tiny"


def _store_with_a_finished_run(db: Path, config_hash: str = "old12steps") -> None:
    with writer(db) as con:
        con.execute(
            """INSERT INTO runs (run_id, cell_id, method, base_model, dataset, status, config_hash, started_at)
            VALUES (?, ?, 'gt_grpo', 'tiny', 'tiny', 'finished', ?, TIMESTAMP '2026-01-01 10:00:00')""",
            [f"{CELL}@1", CELL, config_hash],
        )


def test_a_new_store_has_the_attempts_table_at_the_current_version(tmp_path: Path) -> None:
    with writer(tmp_path / "r.duckdb") as con:
        assert schema.current_version(con) == schema.SCHEMA_VERSION >= 5
        assert [r[0] for r in con.execute("DESCRIBE cell_attempts").fetchall()] == [
            "attempt_id", "cell_id", "config_hash", "attempt", "status", "reason", "recorded_at",
        ]  # fmt: skip


def test_a_failed_attempt_after_a_finished_run_marks_the_cell_failed_for_its_config(tmp_path: Path) -> None:
    db = tmp_path / "r.duckdb"
    _store_with_a_finished_run(db)
    record_attempt(CellAttempt(CELL, "old12steps", "finished", attempt=CELL, recorded_at=datetime(2026, 1, 1, 11)), db)
    with reader(db) as con:
        assert failed_cells(con).empty  # its newest attempt finished: the run is its result

    failure = CellAttempt(CELL, "new16steps", "failed", "train: ValueError: boom", f"{CELL}#2", "run-2",
                          datetime(2026, 1, 2, 9))  # fmt: skip
    record_attempt(failure, db)
    record_attempt(failure, db)  # written again (a retried ingest): replaced, not added
    with reader(db) as con:
        rows = con.execute("SELECT cell_id, config_hash, attempt, status, reason FROM cell_attempts ORDER BY 5")
        assert rows.fetchall() == [
            (CELL, "new16steps", f"{CELL}#2", "failed", "train: ValueError: boom"),
            (CELL, "old12steps", CELL, "finished", None),
        ]
        failed = failed_cells(con).to_dict("records")
        assert failed_cells(con, ["another_cell"]).empty
    assert len(failed) == 1
    row = failed[0]
    assert (row["cell_id"], row["config_hash"], row["reason"]) == (CELL, "new16steps", "train: ValueError: boom")
    assert (row["stored_run_id"], row["stored_config_hash"], row["stored_run_from"]) == (
        f"{CELL}@1", "old12steps", "an earlier config",
    )  # fmt: skip
    assert failure_note(row) == (
        f"FAILED for config new16steps (attempt {CELL}#2): train: ValueError: boom; its stored run {CELL}@1 "
        "(finished) is from an earlier config (old12steps)"
    )

    record_attempt(CellAttempt(CELL, "new16steps", "finished", recorded_at=datetime(2026, 1, 3)), db)
    with reader(db) as con:
        assert failed_cells(con).empty  # a later attempt of the new config finished: no longer failed


def test_an_attempt_status_is_finished_or_failed(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="finished or failed"):
        record_attempt(CellAttempt(CELL, "h", "running"), tmp_path / "r.duckdb")


def test_a_failed_cells_row_shows_no_earlier_figures_and_labels_them_under_the_table(tmp_path: Path) -> None:
    run_dir = tmp_path / "runs" / CELL
    run_dir.mkdir(parents=True)
    rows = [{"step": s, "reward_mean": 0.5, "label_accuracy": 0.75, "response_length_mean": 9.0} for s in (1, 2)]
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run_dir / "run.json").write_text(json.dumps({"config_hash": "old12steps", "status": "finished"}))
    failed = CellReport(CELL, str(run_dir), attempt=f"{CELL}#2")
    failed.record("train", "failed", "ValueError: boom")
    failed.record("evaluate", "not run")
    lines = format_report(PipelineReport("demo", [failed])).splitlines()
    row = next(line for line in lines if line.startswith(CELL))
    assert row.split()[1] == "failed" and "0.500" not in row and "0.750" not in row
    assert f"FAILED {CELL}: train: ValueError: boom" in lines
    assert lines[-1].strip() == (
        f"not this attempt's result: {run_dir} holds a previous run (config old12steps, finished): mean reward 0.500, "
        "label acc 0.750"
    )
    finished = CellReport(CELL, str(run_dir), steps={"train": "skipped"})
    assert "0.500" in format_report(PipelineReport("demo", [finished])).splitlines()[2]  # a finished cell: its own
