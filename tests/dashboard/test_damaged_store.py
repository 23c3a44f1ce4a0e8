"""A store the dashboard cannot use: one error naming the file and what to do, on every page, no exception."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from streamlit.testing.v1 import AppTest

from tests.support.damaged_store import damage, data_block, full_scan

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")
PAGES = [None, "views/paper.py", "views/curves.py", "views/samples.py", "views/data.py"]


def shows_one_error(db: Path, page: str | None, *needles: str) -> None:
    app = AppTest.from_file(APP, default_timeout=60)
    if page:
        app.switch_page(page)
    app.run()
    assert not app.exception, [e.value for e in app.exception]
    assert len(app.error) == 1 and not app.title  # the page stopped at the message
    message = app.error[0].value
    assert str(db) in message and "restore it from a backup" in message
    for needle in needles:
        assert needle in message


def test_a_damaged_block_is_one_error(hand_store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    damage(hand_store, data_block(hand_store, "training_metrics"))
    with pytest.raises(duckdb.Error, match="Corrupt database file"):
        full_scan(hand_store)
    monkeypatch.setenv("COREWARDING_RESULTS_DB", str(hand_store))
    shows_one_error(hand_store, None, "damaged (table training_metrics")


@pytest.mark.parametrize("page", PAGES)
def test_a_file_that_is_not_duckdb_is_one_error_on_every_page(
    page: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "results.duckdb"
    db.write_text("id,value\n1,2\n")
    monkeypatch.setenv("COREWARDING_RESULTS_DB", str(db))
    shows_one_error(db, page, "not a valid DuckDB database")
