"""Headless Chromium for the dashboard's browser tests: one launch with the project's flags, and where screenshots
go ($COREWARDING_SCREENSHOTS_DIR, else the test's tmp_path)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]


def screenshots_dir(tmp_path: Path) -> Path:
    """$COREWARDING_SCREENSHOTS_DIR, else ``tmp_path/screenshots``; made if missing."""
    shots = Path(os.environ.get("COREWARDING_SCREENSHOTS_DIR") or tmp_path / "screenshots")
    shots.mkdir(parents=True, exist_ok=True)
    return shots


@contextmanager
def chromium_browser(chromium: str) -> Iterator[Any]:
    """A headless Chromium (the Debian binary at ``chromium``) through Playwright, closed on the way out."""
    from playwright.sync_api import sync_playwright  # playwright: imported when used (the browser tests only)

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=FLAGS, headless=True)
        try:
            yield browser
        finally:
            browser.close()


def shoot(page: Any, shots: Path, name: str) -> Path:
    """A full-page screenshot ``<name>.png``; the page shows no Streamlit exception and the image is not blank."""
    shot = shots / f"{name}.png"
    page.screenshot(path=str(shot), full_page=True)
    errors = page.locator('[data-testid="stException"]')
    assert errors.count() == 0, f"{name}: {errors.first.inner_text()}"
    assert shot.stat().st_size > 10_000
    return shot
