"""Text that comes from the store (model output, a data file's ids, a run's names and paths) is shown as typed: it
cannot end a code span, load an image, open a link, run HTML or print a fake verdict beside the real one."""

from __future__ import annotations

import html
import shutil
from pathlib import Path

import duckdb
import pytest
from markdown_it import MarkdownIt
from streamlit.testing.v1 import AppTest

from dashboard.common import plain

HOSTILE = (
    "42` ![pixel](https://evil.example/p.png) [docs](javascript:alert(1)) <img src=x onerror=alert(1)> "
    "**strict: True** :red[forged] $x^2$ & &lt; \\` a_b_ # not a heading\n- not a list"
)


def rendered(markdown: str) -> str:
    return MarkdownIt("commonmark").enable("strikethrough").render(markdown).strip()


def test_plain_text_renders_as_itself_under_commonmark() -> None:
    out = rendered(plain(HOSTILE))
    assert out.startswith("<p>") and out.endswith("</p>") and out.count("<") == 2, out  # one paragraph, no markup
    shown = html.unescape(out.removeprefix("<p>").removesuffix("</p>"))
    assert shown == HOSTILE.replace("\n", " ")  # every character as typed (the line break becomes a space)
    raw = rendered(f"extracted `{HOSTILE}`")  # what the page did before: the backtick ends the span early
    assert "<img" in raw or "<a " in raw or "<strong>" in raw


def test_the_samples_page_shows_a_hostile_answer_and_gold_as_text(
    synthetic_store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "results.duckdb"
    shutil.copy(synthetic_store, db)
    with duckdb.connect(str(db)) as con:
        (run_id, problem_id) = con.execute(
            "SELECT run_id, problem_id FROM eval_samples ORDER BY run_id, benchmark, problem_id LIMIT 1"
        ).fetchone()
        con.execute("UPDATE eval_samples SET extracted_answer = ? WHERE run_id = ? AND problem_id = ?",
                    [HOSTILE, run_id, problem_id])  # fmt: skip
    monkeypatch.setenv("COREWARDING_RESULTS_DB", str(db))
    app = AppTest.from_file(str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py"), default_timeout=60)
    app.switch_page("views/samples.py")
    app.run()
    assert not app.exception, [e.value for e in app.exception]
    headers = [m.value for m in app.markdown if "extracted:" in m.value]
    assert headers, [m.value for m in app.markdown]
    shown = rendered(headers[0])
    assert "<img" not in shown and "<a " not in shown and "<code>" not in shown, shown
    assert shown.count("<strong>") == 1  # the page's own bold title, not the answer's "**strict: True**"
    assert html.unescape(shown).count("strict: True") <= 2  # the answer's text, and the real verdict if it is True
    assert HOSTILE.replace("\n", " ") in html.unescape(shown)
