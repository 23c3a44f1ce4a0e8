"""Issue 45 in headless Chromium, on the full-matrix preview (``corewarding results synthetic --matrix paper_v3``: 72
runs): a MATH500 pass@1 column added and sorted by from the page's own pickers, the rows checked against the values
DuckDB reads from the store, and a reload that keeps the choice.

Screenshot ($COREWARDING_SCREENSHOTS_DIR, else tmp_path): runs-sorted-by-math500.png.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import duckdb
import pytest

from corewarding.matrix import load_matrix
from corewarding.results import synthetic
from corewarding.results.synthetic.preview import ingest_preview
from tests.support.browser import chromium_browser, screenshots_dir, shoot
from tests.support.net import dashboard_server

WAIT = 60_000
COLUMN = "eval:MATH500:pass@1:newest"
HEADER = "MATH500 pass@1 (newest ckpt)"


@pytest.fixture(scope="module")
def preview(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The 72-run preview store, as ``results synthetic --matrix paper_v3 --out DIR`` makes it (fewer samples)."""
    out = tmp_path_factory.mktemp("preview")
    synthetic.write_result_set(out, load_matrix("paper_v3").cells, synthetic.SyntheticSpec(samples_per_benchmark=4))
    return ingest_preview(out)


def _expected(db: Path) -> list[tuple[str, float | None]]:
    """Every run with its MATH500 pass@1 (math_verify) at its newest evaluated step, highest first, runs without one
    last (newest run first among them, the table's own order): read with DuckDB, not through the dashboard."""
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute(
            """WITH score AS (SELECT run_id, arg_max(value, step) AS value FROM eval_metrics
                WHERE benchmark = 'MATH500' AND checker = 'math_verify' AND metric = 'pass@1' AND step IS NOT NULL
                GROUP BY run_id)
            SELECT r.run_id, s.value FROM runs r LEFT JOIN score s USING (run_id)
            ORDER BY s.value DESC NULLS LAST, r.started_at DESC NULLS LAST, r.run_id"""
        ).fetchall()
    return [(str(run), None if value is None else float(value)) for run, value in rows]


def _cells(grid: Any, index: int) -> list[str]:
    """The texts of the grid's row ``index`` (aria-rowindex: the header is 1) in its accessible table."""
    return [
        str(t) for t in grid.locator(f'[role="row"][aria-rowindex="{index}"] [role="gridcell"]').all_text_contents()
    ]


def _shown(grid: Any, first: int, last: int, run: int, score: int) -> list[tuple[str, float | None]]:
    """(run id, score) of the data rows ``first``..``last`` (1 is the first data row)."""
    out = []
    for i in range(first, last + 1):
        cells = _cells(grid, i + 1)
        out.append((cells[run], float(cells[score]) if cells[score] else None))
    return out


def _wait_row(page: Any, grid: Any, index: int, run_id: str) -> None:
    """Wait until the grid's data row ``index`` (1 first) shows ``run_id`` (the grid redraws after each rerun)."""
    cell = grid.locator(f'[role="row"][aria-rowindex="{index + 1}"] [role="gridcell"]', has_text=run_id)
    cell.first.wait_for(state="attached", timeout=WAIT)


def _pick(page: Any, widget: str, label: str, typed: str, option: str) -> None:
    """Type ``typed`` into the picker (a multiselect or selectbox) labelled ``label`` and click ``option``."""
    box = page.locator(f'[data-testid="{widget}"]', has=page.get_by_text(label, exact=True)).locator("input")
    box.first.click()
    page.keyboard.type(typed)
    page.locator('[role="option"]', has_text=option).first.click()


def test_a_benchmark_column_sorted_in_chromium_survives_a_reload(chromium: str, preview: Path, tmp_path: Path) -> None:
    expected = _expected(preview)
    scores = [v for _, v in expected if v is not None]
    assert len(expected) == 72 and len(set(scores)) == len(scores) > 60  # distinct: one right order
    shots = screenshots_dir(tmp_path)
    with chromium_browser(chromium) as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        with dashboard_server(preview) as url:
            page.goto(f"{url}/runs")
            page.get_by_text("72 of 72 runs").wait_for(timeout=WAIT)
            _pick(page, "stMultiSelect", "Columns", "MATH500 pass@1 (newest", HEADER)
            page.keyboard.press("Escape")  # close the picker's list
            page.wait_for_url(lambda u: COLUMN in parse_qs(urlsplit(u).query).get("col", []), timeout=WAIT)
            _pick(page, "stSelectbox", "Sort by", "MATH500 pass@1 (newest", HEADER)
            page.wait_for_url(lambda u: parse_qs(urlsplit(u).query).get("sort") == [COLUMN], timeout=WAIT)
            assert parse_qs(urlsplit(page.url).query)["order"] == ["desc"]  # descending: the default direction
            grid = page.locator('[data-testid="stDataFrame"]').last
            _wait_row(page, grid, 1, expected[0][0])
            headers = [str(h) for h in grid.locator('[role="columnheader"]').all_text_contents()]
            assert headers[:3] == ["run page", "run_id", HEADER], headers  # the added column beside the run id
            run, score = headers.index("run_id"), headers.index(HEADER)
            assert _shown(grid, 1, 10, run, score) == expected[:10]
            grid.scroll_into_view_if_needed()
            shoot(page, shots, "runs-sorted-by-math500")

            box = grid.bounding_box()
            assert box is not None
            page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
            page.mouse.wheel(0, 10_000)  # the grid's last rows: the lowest scores, then the runs with none
            _wait_row(page, grid, 72, expected[-1][0])
            assert _shown(grid, 63, 72, run, score) == expected[-10:]
            assert expected[-1][1] is None and expected[-3][1] is not None  # the running and failed runs: no score

            address = page.url
            page.reload()
            _wait_row(page, grid, 1, expected[0][0])
            assert page.url == address
            sort_box = page.locator('[data-testid="stSelectbox"]', has=page.get_by_text("Sort by", exact=True))
            assert HEADER in sort_box.first.inner_html()  # the picker shows the sort it restored
            assert _shown(grid, 1, 10, run, score) == expected[:10]
    print(f"screenshots in {shots}")
