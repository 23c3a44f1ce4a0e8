"""Issue 33 in headless Chromium: a compared pair that survives a reload, an unknown run named once, the run table's
metric columns, three runs compared, the run page's system metrics and cards that fit, and addresses that stay true.

Screenshots go to $COREWARDING_SCREENSHOTS_DIR, else tmp_path: compare-after-reload.png, run-unknown.png,
runs-metric-columns.png, compare-three.png, run-system-metrics.png.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.support.browser import chromium_browser, screenshots_dir, shoot
from tests.support.net import dashboard_server

CHART = '[data-testid="stVegaLiteChart"]'
A, B, C = "gt_grpo__qwen2.5-3b__math", "co_rewarding_2__qwen2.5-3b__math", "entropy__qwen2.5-3b__math"
WAIT = 60_000


def _params(page: Any) -> dict[str, list[str]]:
    return parse_qs(urlsplit(page.url).query)


def _settled(page: Any) -> None:
    """Wait until the page's script run is over (Streamlit's running indicator gone)."""
    page.wait_for_function(
        "!document.querySelector('[data-testid=\"stStatusWidget\"]')"
        " || getComputedStyle(document.querySelector('[data-testid=\"stStatusWidget\"]')).visibility === 'hidden'",
        timeout=WAIT,
    )


def _config_header(page: Any) -> str:
    header = page.locator("h3", has_text="key(s) differ across").first
    header.wait_for(timeout=WAIT)
    return str(header.inner_text())


def _picked(page: Any) -> list[str]:
    """The runs shown as chosen in the compare page's picker."""
    tags = page.locator('[data-testid="stMultiSelectTagsContainer"] span[title]')
    tags.first.wait_for(timeout=WAIT)  # the picker draws its tags after the page's text
    return [str(t) for t in tags.all_text_contents()]


def _overflowing(page: Any, selector: str) -> list[str]:
    """Text of elements under ``selector`` cut by their box (wider content than the element shows)."""
    return list(
        page.evaluate(
            """(sel) => [...document.querySelectorAll(sel + ' *')]
            .filter(e => e.scrollWidth > e.clientWidth + 1)
            .map(e => e.textContent)""",
            selector,
        )
    )


def _compare(page: Any, url: str, shots: Path) -> None:
    page.goto(f"{url}/compare?a={A}&b={B}")
    header = _config_header(page)
    pair = _picked(page)
    assert [p.split("@")[0] for p in pair] == [A, B], pair
    page.reload()
    assert _config_header(page) == header  # the same number of differing keys
    assert _picked(page) == pair and _params(page) == {"a": [A], "b": [B]}
    page.locator(CHART).first.wait_for(timeout=WAIT)
    shoot(page, shots, "compare-after-reload")

    page.goto(f"{url}/compare?runs={A}&runs={B}&runs={C}")
    page.locator("h3", has_text="differ across 3 runs").wait_for(timeout=WAIT)
    legend = page.locator(f"{CHART} g.role-legend-label text")
    legend.first.wait_for(timeout=WAIT)
    assert sorted(legend.all_text_contents()) == sorted(
        ["gt_grpo · qwen2.5-3b · math", "co_rewarding_2 · qwen2.5-3b · math", "entropy · qwen2.5-3b · math"]
    )
    page.locator("h3", has_text="Curves").scroll_into_view_if_needed()  # the three runs' curves in the screenshot
    shoot(page, shots, "compare-three")
    picker = page.locator('[data-testid="stMultiSelect"] input[role="combobox"]')
    picker.click()
    picker.fill("co_rewarding_1__qwen2.5-3b")
    option = page.locator('[role="option"]', has_text="co_rewarding_1__qwen2.5-3b__math@").first
    option.wait_for(timeout=WAIT)
    option.click()  # a fourth run picked in the page
    page.locator("h3", has_text="differ across 4 runs").wait_for(timeout=WAIT)
    page.wait_for_url(lambda u: len(parse_qs(urlsplit(u).query).get("runs", [])) == 4, timeout=WAIT)
    four = _picked(page)
    page.reload()
    page.locator("h3", has_text="differ across 4 runs").wait_for(timeout=WAIT)
    assert _picked(page) == four


def _run_pages(page: Any, url: str, shots: Path) -> None:
    page.goto(f"{url}/run?cell=does_not_exist")
    page.get_by_text("No run or cell does_not_exist in this store").wait_for(timeout=WAIT)
    _settled(page)
    assert page.locator('[data-testid="stAlertContentError"]').count() == 1
    assert page.locator('[data-testid="stSelectbox"]').count() == 0 and page.locator("h3").count() == 0
    assert _params(page) == {"cell": ["does_not_exist"]}
    shoot(page, shots, "run-unknown")

    page.goto(f"{url}/run?cell={B}")
    page.locator("h3", has_text="System metrics").wait_for(timeout=WAIT)
    page.get_by_text("Not recorded by this backend (synthetic)").wait_for(timeout=WAIT)
    _settled(page)
    assert page.locator('[data-testid="stMetric"]').count() == 5
    assert _overflowing(page, '[data-testid="stMetric"]') == []  # no card cuts its label or value
    page.locator(CHART).last.wait_for(timeout=WAIT)  # the system metrics' chart, the page's last
    page.locator("h3", has_text="System metrics").scroll_into_view_if_needed()  # the section in the screenshot
    shoot(page, shots, "run-system-metrics")
    box = page.locator('[data-testid="stSelectbox"]').first
    box.click()
    page.keyboard.type(A)
    option = page.locator('[role="option"]', has_text=A + "@").first
    option.wait_for(timeout=WAIT)
    option.click()  # another run picked: one consistent address
    page.wait_for_url(lambda u: set(parse_qs(urlsplit(u).query)) == {"run"}, timeout=WAIT)
    assert _params(page)["run"][0].startswith(A + "@")

    page.goto(f"{url}/run?cell={C}")  # Entropy's reward unit, the longest card label
    page.get_by_text("Reward (-nats)").wait_for(timeout=WAIT)
    _settled(page)
    assert _overflowing(page, '[data-testid="stMetric"]') == []

    page.goto(f"{url}/run")  # a default choice is written into the address
    page.wait_for_url(lambda u: "run" in parse_qs(urlsplit(u).query), timeout=WAIT)
    shown = _params(page)["run"][0]
    page.reload()
    page.locator("h3", has_text="System metrics").wait_for(timeout=WAIT)
    assert shown in page.locator('[data-testid="stSelectbox"]').first.inner_html()  # the picker's value
    assert _params(page) == {"run": [shown]}

    page.goto(f"{url}/samples")  # the Samples page binds run= to its own picker; the Run page, reached from it, writes
    page.locator('[data-testid="stDataFrame"]').first.wait_for(timeout=WAIT)
    page.locator('[data-testid="stSidebarNav"] a[href$="/run"]').click()
    page.wait_for_url(lambda u: urlsplit(u).path.endswith("/run") and parse_qs(urlsplit(u).query) == {"run": [shown]})
    assert page.locator('[data-testid="stException"]').count() == 0


def _runs_table(page: Any, url: str, shots: Path) -> None:
    page.goto(f"{url}/runs?q=qwen2.5-3b&group=method")
    page.get_by_text("6 of 12 runs").wait_for(timeout=WAIT)
    grid = page.locator('[data-testid="stDataFrame"]').last
    headers = grid.locator('[role="columnheader"]')  # the grid's accessible table (hidden): the columns in view
    headers.first.wait_for(state="attached", timeout=WAIT)
    names = headers.all_text_contents()
    for column in ("run_id", "status", "last val acc", "last reward", "reward unit", "collapse", "train hours"):
        assert column in names, names
    cells = grid.locator('[role="gridcell"]').all_text_contents()
    assert (cells.count("0/1"), cells.count("nats"), cells.count("-nats")) == (4, 1, 1), cells
    shoot(page, shots, "runs-metric-columns")


def test_navigation_and_tables_of_issue_33(chromium: str, synthetic_store: Path, tmp_path: Path) -> None:
    shots = screenshots_dir(tmp_path)
    with chromium_browser(chromium) as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        with dashboard_server(synthetic_store) as url:
            _compare(page, url, shots)
            _run_pages(page, url, shots)
            _runs_table(page, url, shots)
    print(f"screenshots in {shots}")
