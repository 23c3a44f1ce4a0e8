"""Issue 45's curves panels in headless Chromium: a wheel over one panel (log y, "Zoom y too") zooms that panel only,
the others keeping their x and y ranges; and a Self-Certainty run (nats, ~13.5) beside a Majority-Voting run (0/1)
draws its reward in a panel of its own, each panel one run's line.

Screenshots go to $COREWARDING_SCREENSHOTS_DIR, else tmp_path: curves-zoom-one-panel.png, curves-reward-units.png.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from corewarding.results.ingest.ingestion import ingest
from dashboard.common import METHOD_COLOURS
from tests.support.browser import chromium_browser, screenshots_dir, shoot
from tests.support.net import dashboard_server

CHART = '[data-testid="stVegaLiteChart"]'
WAIT = 60_000
STEPS = 20
REWARDS = {"majority_voting": (0.30, 0.90), "self_certainty": (13.30, 13.60)}  # 0/1 and nats, first to last step
PAGE = "curves?methods=majority_voting&methods=self_certainty"
# Each concat panel of the chart (Vega names its group "concat_<i>_group"): its title, its axes' aria labels (which
# give each scale's domain, "... with values from 0.026 to 0.036") and the colours of its lines.
PANELS_JS = """() => [...document.querySelectorAll('[data-testid="stVegaLiteChart"] g.mark-group.role-scope')]
    .filter(g => /(^| )concat_[0-9]+_group( |$)/.test(g.getAttribute('class')))
    .map(g => ({
        title: (g.querySelector('g.role-title-text text') || {}).textContent,
        y: (g.querySelector('g[aria-label^="Y-axis"]') || {getAttribute: () => null}).getAttribute('aria-label'),
        x: (g.querySelector('g[aria-label^="X-axis"]') || {getAttribute: () => null}).getAttribute('aria-label'),
        strokes: [...new Set([...g.querySelectorAll('g.mark-line path')].map(p => p.getAttribute('stroke')))],
    }))"""


def _units_store(root: Path) -> Path:
    """A Majority-Voting run (reward 0.3 to 0.9) and a Self-Certainty run (13.3 to 13.6 nats) on Qwen3-8B-Base x
    MATH, with the reviewer's other ranges: validation accuracy near 0.03, label accuracy 0.2-0.8, length 18-20."""
    dirs = []
    for method, (first, last) in REWARDS.items():
        run = root / method
        run.mkdir(parents=True)
        cell = f"method: {{name: {method}}}\nbase_model: {{name: qwen3-8b-base}}\ndataset: {{name: math}}\n"
        (run / "config.yaml").write_text("backend: local\n" + cell)
        lines = []
        for step in range(1, STEPS + 1):
            t = (step - 1) / (STEPS - 1)
            row = {
                "step": step,
                "reward_mean": first + (last - first) * t,
                "label_accuracy": 0.2 + 0.6 * t,
                "response_length_mean": 20 - 2 * t,
                "val_accuracy": 0.026 + 0.01 * t - 0.002 * (method == "majority_voting"),  # two lines, apart
                "step_seconds": 60,
            }
            lines.append(json.dumps(row) + "\n")
        (run / "metrics.jsonl").write_text("".join(lines))
        (run / "run.json").write_text(json.dumps({"status": "finished", "started_at": "2026-01-01T00:00:00Z"}))
        dirs.append(run)
    ingest(root / "results.duckdb", run_dirs=dirs)
    return root / "results.duckdb"


def _panels(page: Any, count: int) -> dict[str, dict[str, Any]]:
    """The chart's panels by title, once ``count`` of them are drawn with both axes."""
    page.wait_for_function(
        f"(n) => {{ const p = ({PANELS_JS})(); return p.length === n && p.every(x => x.title && x.x && x.y); }}",
        arg=count,
        timeout=WAIT,
    )
    return {p["title"]: p for p in page.evaluate(PANELS_JS)}


def wheel_until(page: Any, axis: dict[str, float], condition: str, arg: Any, tries: int = 10) -> None:
    """Scroll up (zoom in) over the plot right of the y ``axis`` box until the JS ``condition(arg)`` holds. Headless
    Chromium may let a wheel event pass undrawn (Vega draws it with the next one, in a single view as in a concat),
    so each try waits a while for the condition and a try without it scrolls again."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout  # playwright: the browser tests only

    page.mouse.move(axis["x"] + axis["width"] + 80, axis["y"] + axis["height"] / 2)
    for _ in range(tries):
        page.mouse.wheel(0, -400)
        try:
            page.wait_for_function(condition, arg=arg, timeout=WAIT // tries)
            return
        except PlaywrightTimeout:
            continue
    raise AssertionError(f"{tries} wheel events over the panel and still not {condition}")


def _domain(aria: str) -> tuple[float, float]:
    low, high = re.search(r"values from (\S+) to (\S+)$", aria).groups()  # type: ignore[union-attr]
    return float(low.replace(",", "")), float(high.replace(",", ""))


def _zoom_one_panel(page: Any, url: str, shots: Path) -> None:
    """The reviewer's case: log y, y zoom on, a wheel over val_accuracy. Only val_accuracy's ranges change."""
    page.goto(f"{url}/{PAGE}&log_y=true&zoom_y=true")
    page.wait_for_selector("h1:has-text('Training curves')", timeout=WAIT)
    titles = ["val_accuracy", "reward_mean (0/1)", "reward_mean (nats)", "label_accuracy", "response_length_mean"]
    before = _panels(page, len(titles))
    assert sorted(before) == sorted(titles), list(before)
    assert all("log scale" in p["y"] for p in before.values()), before
    axis = page.locator(f'{CHART} g.concat_0_group g[aria-label^="Y-axis"]')  # val_accuracy, the first panel
    changed = f"(before) => ({PANELS_JS})().find(p => p.title === 'val_accuracy').y !== before"
    wheel_until(page, axis.bounding_box(), changed, before["val_accuracy"]["y"])
    after = _panels(page, len(titles))
    low, high = _domain(after["val_accuracy"]["y"])
    was_low, was_high = _domain(before["val_accuracy"]["y"])
    assert was_low <= low < high <= was_high and high - low < was_high - was_low, (before, after)  # zoomed in
    for title in titles[1:]:  # every other panel keeps its own ranges
        assert (after[title]["y"], after[title]["x"]) == (before[title]["y"], before[title]["x"]), (title, after)
    assert _domain(after["label_accuracy"]["y"])[1] >= 0.8 and _domain(after["response_length_mean"]["y"])[1] >= 20
    left = page.locator(CHART).first.bounding_box()["x"]
    ticks = page.locator(f'{CHART} g.concat_0_group g[aria-label^="Y-axis"] g.role-axis-label text')
    cut = [ticks.nth(i).text_content() for i in range(ticks.count()) if ticks.nth(i).bounding_box()["x"] < left - 1]
    assert ticks.count() and not cut, cut  # the zoomed panel's longer tick labels ("0.0305") are whole on the page
    page.locator(CHART).first.scroll_into_view_if_needed()
    shoot(page, shots, "curves-zoom-one-panel")


def _reward_units_apart(page: Any, url: str, shots: Path) -> None:
    """Each reward panel holds one unit, one run's line: nats near 13.5 alone, 0/1 alone."""
    page.goto(f"{url}/{PAGE}")
    page.wait_for_selector("h1:has-text('Training curves')", timeout=WAIT)
    panels = _panels(page, 5)
    colours = {m: METHOD_COLOURS[m].lower() for m in REWARDS}
    for title, method in (("reward_mean (0/1)", "majority_voting"), ("reward_mean (nats)", "self_certainty")):
        strokes = {str(s).lower() for s in panels[title]["strokes"]}
        assert strokes == {colours[method]}, (title, strokes)  # the raw and smoothed lines of one run
        low, high = _domain(panels[title]["y"])
        first, last = REWARDS[method]
        assert low <= first and last <= high and high - low <= 2 * (last - first), (title, panels[title]["y"])
    assert {str(s).lower() for s in panels["val_accuracy"]["strokes"]} == set(colours.values())  # both runs
    page.locator(CHART).first.scroll_into_view_if_needed()
    shoot(page, shots, "curves-reward-units")


def test_a_panel_zooms_alone_and_reward_units_are_apart(chromium: str, tmp_path: Path) -> None:
    shots = screenshots_dir(tmp_path)
    store = _units_store(tmp_path / "units")
    with chromium_browser(chromium) as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        with dashboard_server(store) as url:
            _reward_units_apart(page, url, shots)
            _zoom_one_panel(page, url, shots)
    print(f"screenshots in {shots}")
