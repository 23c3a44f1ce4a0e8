"""The paper page offers the reproduction report (`corewarding report`) as a download, built on click."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from streamlit.runtime.media_file_manager import MediaFileManager
from streamlit.testing.v1 import AppTest

from corewarding.results.report.build import build_report

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")


def _without_time(html: str) -> str:
    return re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", "TIME", html)


def test_paper_page_downloads_the_report(synthetic_store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COREWARDING_RESULTS_DB", str(synthetic_store))
    deferred: dict[str | None, Callable[[], Any]] = {}
    add_deferred = MediaFileManager.add_deferred

    def spy(self: MediaFileManager, data: Callable[[], Any], *args: Any, **kwargs: Any) -> str:
        deferred[kwargs.get("file_name")] = data  # the generator Streamlit runs when the button is clicked
        return add_deferred(self, data, *args, **kwargs)

    monkeypatch.setattr(MediaFileManager, "add_deferred", spy)
    app = AppTest.from_file(APP, default_timeout=60)
    app.switch_page("views/paper.py")
    app.run()
    assert not app.exception, [e.value for e in app.exception]
    buttons = [b for b in app.get("download_button") if b.proto.label == "Download the reproduction report (HTML)"]
    assert len(buttons) == 1 and buttons[0].proto.deferred_file_id
    html = deferred["report-paper.html"]()  # the page's checker and checkpoint: math_verify, latest
    assert html.startswith("<!DOCTYPE html>") and "<h1>Reproduction report: matrix paper</h1>" in html
    assert _without_time(html) == _without_time(build_report(synthetic_store, "paper", "math_verify", "latest"))
    # one seed per cell and none to borrow from: the collapsed majority-voting cells are undecided, not flagged
    assert "12 run(s) are synthetic" in html and "<td>undecided (one seed)</td>" in html
