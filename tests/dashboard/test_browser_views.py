"""The views a W&B user reaches for, in headless Chromium: state in the URL, a heat-map cell opening its run page,
two runs compared, 66 runs grouped by method, the paper page after the demo, and the dark theme.

Screenshots go to $COREWARDING_SCREENSHOTS_DIR, else tmp_path: run-page.png, eval-curves.png, curves-grouped.png,
config-diff.png, run-table-filtered.png, paper-empty-after-demo.png, curves-dark.png.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from corewarding.matrix import load_matrix
from corewarding.results import synthetic
from corewarding.results.ingest.ingestion import ingest
from tests.support.browser import chromium_browser, screenshots_dir, shoot
from tests.support.net import dashboard_server

CHART = '[data-testid="stVegaLiteChart"]'


def _store(root: Path, matrix: str, cells: int | None = None) -> Path:
    spec = synthetic.SyntheticSpec(samples_per_benchmark=4)
    runs, data = synthetic.write_result_set(root, load_matrix(matrix).cells[:cells], spec)
    ingest(root / "results.duckdb", [runs], data_dirs=[data])
    return root / "results.duckdb"


def _open(page: Any, url: str, title: str) -> None:
    page.goto(url)
    page.wait_for_selector(f"h1:has-text('{title}')", timeout=60_000)
    page.wait_for_timeout(1500)  # the widgets bound to the URL settle, the charts draw


def _radio_checked(page: Any, label: str) -> bool:
    return bool(page.locator(f'label:has-text("{label}") input[type="radio"]').first.is_checked())


def test_url_state_run_page_comparison_grouping_and_empty_paper_page(
    chromium: str, synthetic_store: Path, tmp_path: Path
) -> None:
    shots = screenshots_dir(tmp_path)
    paper66 = _store(tmp_path / "paper", "paper")
    demo = _store(tmp_path / "demo", "demo")
    with chromium_browser(chromium) as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        with dashboard_server(synthetic_store) as url:
            # a choice carried by the URL is the page's choice
            _open(page, f"{url}/curves?source=evaluation+by+checkpoint", "Training curves")
            assert _radio_checked(page, "evaluation by checkpoint") and not _radio_checked(page, "training metrics")
            page.wait_for_selector(CHART, timeout=60_000)
            shoot(page, shots, "eval-curves")

            # a heat-map cell opens the run page of that cell
            _open(page, f"{url}/", "Matrix")
            cells = page.locator(f"{CHART} g.mark-text text")
            assert cells.nth(5).text_content() == "finished"  # row qwen2.5-3b · math, 6th method column
            cells.nth(5).click()
            page.wait_for_selector("h1:has-text('Run')", timeout=60_000)
            page.wait_for_timeout(1500)
            picked = page.locator('[data-testid="stSelectbox"]').first.inner_html()
            assert "co_rewarding_2__qwen2.5-3b__math@" in picked, picked
            page.wait_for_selector(CHART, timeout=60_000)
            shoot(page, shots, "run-page")
            page.go_back()  # the browser's back button returns to the heat map
            page.wait_for_selector("h1:has-text('Matrix')", timeout=60_000)

            # the run table filtered by the URL, two runs compared
            _open(page, f"{url}/runs?method=co_rewarding_1", "Runs")
            assert page.get_by_text("2 of 12 runs").count() == 1
            shoot(page, shots, "run-table-filtered")
            a, b = "gt_grpo__qwen2.5-3b__math", "co_rewarding_2__qwen2.5-3b__math"
            _open(page, f"{url}/compare?a={a}&b={b}", "Compare runs")
            page.wait_for_selector('[data-testid="stDataFrame"]', timeout=60_000)
            header = page.locator("h3").first.inner_text()
            assert header.startswith("Config: ") and not header.startswith("Config: 0 "), header
            assert page.get_by_text("method.name").count() >= 1 or "differ" in header
            shoot(page, shots, "config-diff")
        with dashboard_server(paper66) as url:
            every = "&".join(
                [f"base_models={c.base_model}" for c in load_matrix("paper").cells[::6]]
                + [f"datasets={d}" for d in ("math", "dapo14k", "openrs")]
            )  # every setting of the 66 runs
            _open(page, f"{url}/curves?group=method&{every}", "Training curves")
            caption = page.get_by_text("groups by method").first.inner_text()
            assert "66 runs in 6 groups by method" in caption, caption
            legend = page.locator(f"{CHART} g.role-legend-label text")
            legend.first.wait_for(timeout=60_000)  # the chart draws its legend after the caption is there
            assert 0 < legend.count() <= 7, legend.count()
            shoot(page, shots, "curves-grouped")
        with dashboard_server(demo) as url:
            _open(page, f"{url}/paper", "Paper vs reproduction")
            page.get_by_text("No run in the store is a cell of").first.wait_for(timeout=60_000)
            shoot(page, shots, "paper-empty-after-demo")
        dark = browser.new_page(viewport={"width": 1400, "height": 1000}, color_scheme="dark")
        with dashboard_server(synthetic_store) as url:
            _open(dark, f"{url}/curves", "Training curves")
            dark.wait_for_selector(CHART, timeout=60_000)
            background = dark.evaluate("getComputedStyle(document.querySelector('.stApp')).backgroundColor")
            assert background != "rgb(255, 255, 255)", background  # the dark theme is on
            shoot(dark, shots, "curves-dark")
    print(f"screenshots in {shots}")
