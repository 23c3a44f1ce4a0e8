"""The report's released-checkpoint section over the hand-written store of tests/support/released_store.py: the three
columns with their numbers, the verdicts, the flag and the settings listed per column; and the hint without audits."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from corewarding.results.report.build import build_report
from corewarding.results.report.released import TITLE
from corewarding.results.store.store import writer
from tests.support import released_store


@pytest.fixture(scope="module")
def section(tmp_path_factory: pytest.TempPathFactory) -> str:
    db = released_store.build(tmp_path_factory.mktemp("released-report") / "results.duckdb")
    html = build_report(db, "paper_v3")
    return html.split(f'<h2 id="released">{TITLE}</h2>', 1)[1].split("<h2", 1)[0]


def _rows(section: str) -> list[list[str]]:
    body = section.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    return [re.findall(r"<td>(.*?)</td>", row) for row in re.findall(r"<tr[^>]*>(.*?)</tr>", body)]


def test_paper_released_and_reproduced_side_by_side_with_verdicts_and_flag(section: str) -> None:
    rows = {(r[0], r[1], r[4].split("<br>")[0]): r for r in _rows(section)}
    assert len(rows) == 4  # GT MATH500 seed 0 and seed 1, GT GSM8K, C3 MATH500
    seed1 = rows[(released_store.GT, "MATH500", "76.50 [74.00, 79.00]")]
    assert seed1[3] == "80.00" and seed1[5].startswith("71.23 [68.00, 74.50]<br><small>step 20 · settings ")
    assert seed1[6:] == ["outside released CI", "CIs overlap", "⚠ settings differ: seed (evaluation)"]
    seed0 = rows[(released_store.GT, "MATH500", "81.23 [78.00, 84.00]")]
    assert seed0[6:] == ["within released CI", "CIs disjoint", "⚠ settings differ: seed (evaluation)"]
    gsm8k = rows[(released_store.GT, "GSM8K", "91.00 [89.00, 93.00]")]
    assert gsm8k[5].startswith("85.00 [no CI]") and gsm8k[6:] == [
        "within released CI", "no CI", "⚠ settings differ: settings unknown",
    ]  # fmt: skip
    c3 = rows[(released_store.C3, "MATH500", "60.00 [55.00, 65.00]")]
    assert (c3[3], c3[5], c3[6:]) == ("–", "–", ["no paper value", "not reproduced", ""])
    assert section.count('<tr class="out">') == 2  # the paper outside an interval; two disjoint intervals


def test_the_settings_are_listed_per_column_and_escaped(section: str) -> None:
    listing = section.split("<h3>Settings per column</h3>", 1)[1]
    headers = re.findall(r"<th>(.*?)</th>", listing)
    assert headers[0] == "setting" and [h.split(" · ")[0] for h in headers[1:]] == [
        "released", "released", "reproduced", "reproduced",
    ]  # fmt: skip
    assert headers[3] == "reproduced · not recorded"  # the run's GSM8K score, stored without settings
    rows = {r[0]: r[1:] for r in _rows(listing)}
    assert rows["seed"] == ["0", "1", "–", "0"] and rows["backend"] == ["vllm 0.10.1"] * 2 + ["–", "vllm 0.10.1"]
    assert rows["checker"][0] == "math_verify 0.8.0" and rows["max_new_tokens"][0] == "3072"
    assert rows["prompt"][0].startswith("Please reason step by step, and put &lt;b&gt;your final")
    assert "<b>" not in section  # the prompt from the store is escaped


def test_without_audits_the_section_says_how_to_get_them(tmp_path: Path) -> None:
    db = released_store.build(tmp_path / "results.duckdb")
    with writer(db) as con:
        con.execute("DELETE FROM eval_metrics WHERE source = 'released'")
    html = build_report(db, "paper_v3")
    assert f'<h2 id="released">{TITLE}</h2><p>No released checkpoint' in html
    assert "<code>corewarding audit --matrix paper_v3</code>" in html
