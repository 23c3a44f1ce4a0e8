"""`corewarding dashboard` in a real browser: every page opened in headless Chromium, with a screenshot each.

Needs Debian's ``chromium`` (CI installs it: ``make chromium`` in .ci/run). Without it the test skips, except under
CI (``CI`` set), where a missing browser is a failure. Screenshots go to $COREWARDING_SCREENSHOTS_DIR, else tmp_path.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.browser import chromium_browser, screenshots_dir, shoot
from tests.support.net import dashboard_server

PAGES = [
    ("", "Matrix", "stVegaLiteChart"),
    ("paper", "Paper vs reproduction", "stVegaLiteChart"),
    ("claims", "Paper claims", "stDataFrame"),
    ("curves", "Training curves", "stVegaLiteChart"),
    ("samples", "Samples", "stCode"),
    ("data", "Data quality", "stVegaLiteChart"),
]


def _listening_addresses(port: int) -> set[str]:
    """Local addresses (hex, as /proc/net/tcp writes them) listening on ``port``."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, hexport = local.rsplit(":", 1)
            if state == "0A" and int(hexport, 16) == port:
                found.add(address)
    return found


@pytest.fixture()
def server(chromium: str, synthetic_store: Path) -> Iterator[str]:
    with dashboard_server(synthetic_store) as url:
        yield url


def _new_views(page: Any, server: str, shots: Path) -> None:
    """The views of issue 15: curves against wall time, a sample opened by a click, the matrix in a narrow window."""
    page.goto(f"{server}/curves")
    page.wait_for_selector('[data-testid="stVegaLiteChart"]', timeout=60_000)
    page.get_by_text("wall time", exact=True).click()
    page.wait_for_timeout(1500)
    page.wait_for_selector('[data-testid="stVegaLiteChart"]', timeout=60_000)
    shoot(page, shots, "curves-wall-time")
    page.goto(f"{server}/samples")
    grid = page.locator('[data-testid="stDataFrame"]').nth(1)
    grid.wait_for(timeout=60_000)
    grid.scroll_into_view_if_needed()
    box = grid.bounding_box()
    assert box is not None
    page.mouse.click(box["x"] + 12, box["y"] + 35 * 3 + 17)  # the selection box of the 3rd row
    page.get_by_text("AMC · amc-0 · sample #2").wait_for(timeout=30_000)  # the 3rd row, opened below the table
    page.wait_for_timeout(500)
    assert page.locator('[data-testid="stCode"]').first.inner_text().startswith("Problem 0 of AMC: what is x")
    shoot(page, shots, "samples-clicked-row")
    page.set_viewport_size({"width": 900, "height": 1000})
    page.goto(f"{server}/")
    page.wait_for_selector('[data-testid="stVegaLiteChart"]', timeout=60_000)
    shoot(page, shots, "matrix-narrow")


def test_every_page_renders_in_chromium(chromium: str, server: str, tmp_path: Path) -> None:
    port = int(server.rsplit(":", 1)[1])
    assert _listening_addresses(port) == {"0100007F"}  # 127.0.0.1 only
    shots = screenshots_dir(tmp_path)
    with chromium_browser(chromium) as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        for path, title, element in PAGES:
            page.goto(f"{server}/{path}")
            page.wait_for_selector(f"h1:has-text('{title}')", timeout=60_000)
            page.wait_for_selector(f'[data-testid="{element}"]', timeout=60_000)
            page.wait_for_selector('[data-testid="stDataFrame"]', timeout=60_000)
            shoot(page, shots, path or "matrix")
        _new_views(page, server, shots)
    print(f"screenshots in {shots}")
