"""A cell whose newest pipeline attempt failed (issue 32): the matrix and run pages and `corewarding report` show it
FAILED for that attempt's config, and its stored run only as a run of an earlier config; store text is escaped."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from corewarding.results.ingest.attempts import CellAttempt, record_attempt
from corewarding.results.ingest.ingestion import ingest
from corewarding.results.report.build import build_report
from corewarding.results.report.collect import FAILED
from corewarding.results.store.store import writer
from tests.support.apptest import render

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")
CELL = "gt_grpo__tiny__tiny"
REASON = "train: ValueError: *boom* [x](http://e.x)"  # store text with markdown in it


@pytest.fixture()
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The paper's numbers, the cell's finished 12-step run (config old12steps), then a failed 16-step attempt."""
    db = tmp_path / "results.duckdb"
    ingest(db)
    with writer(db) as con:
        con.execute(
            """INSERT INTO runs (run_id, cell_id, method, base_model, dataset, status, config_hash, started_at,
            last_step, total_steps) VALUES (?, ?, 'gt_grpo', 'tiny', 'tiny', 'finished', 'old12steps',
            TIMESTAMP '2026-01-01 10:00:00', 12, 12)""",
            [f"{CELL}@1", CELL],
        )
    record_attempt(CellAttempt(CELL, "old12steps", "finished", attempt=CELL, recorded_at=datetime(2026, 1, 1, 11)), db)
    record_attempt(CellAttempt(CELL, "new16steps", "failed", REASON, CELL, recorded_at=datetime(2026, 1, 2)), db)
    monkeypatch.setenv("COREWARDING_RESULTS_DB", str(db))
    return db


def test_the_matrix_page_marks_the_cell_failed_and_labels_its_stored_run(store: Path) -> None:
    app = AppTest.from_file(APP, default_timeout=60)
    app.query_params["cells"] = "runs in the store"
    render(app, "views/matrix.py")
    errors = [e.value for e in app.error]
    assert len(errors) == 1 and errors[0].startswith("gt\\_grpo\\_\\_tiny\\_\\_tiny: FAILED for config new16steps")
    assert "\\*boom\\* \\[x\\]\\(http\\:" in errors[0]  # escaped by plain(): shown as typed
    assert "from an earlier config (old12steps)" in errors[0].replace("\\", "")
    grid = app.dataframe[0].value
    row = grid[grid["cell_id"] == CELL].iloc[0]
    assert row["status"] == "failed" and row["progress"] == ""  # not the old run's "finished", "12/12"


def test_the_run_page_of_the_cell_says_its_newest_attempt_failed(store: Path) -> None:
    app = render(AppTest.from_file(APP, default_timeout=60), "views/run.py", cell=CELL)
    assert len(app.error) == 1 and "FAILED for config new16steps" in app.error[0].value.replace("\\", "")


def test_the_report_lists_the_cell_as_failed_not_as_its_old_run(store: Path) -> None:
    html = build_report(store, "demo")
    assert "Cells whose newest attempt failed (1)" in html
    assert f"<td>{CELL}</td><td>0</td><td>{FAILED}</td>" in html  # cells without a paper value: seed 0, not "finished"
    assert "from an earlier config (old12steps)" in html and "*boom* [x](http://e.x)" in html
