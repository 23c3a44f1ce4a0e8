"""Issue 33's charts in headless Chromium: a log y axis chosen on the page and kept across a reload, legend swatches
visible on the dark theme, identical evaluation curves noted as coinciding, a chart downloaded as PNG and SVG, live
refresh, charts as wide as the page, and the matrix's headers and legend at 1400 px.

Screenshots go to $COREWARDING_SCREENSHOTS_DIR, else tmp_path: curves-log-scale.png, curves-dark-legend.png,
eval-coinciding.png, curves-export.png, matrix-1400.png.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pandas as pd

from corewarding.results.ingest.ingestion import ingest
from dashboard.common import METHOD_COLOURS
from tests.dashboard.test_browser_panels import wheel_until
from tests.support.browser import chromium_browser, screenshots_dir, shoot
from tests.support.net import dashboard_server

CHART = '[data-testid="stVegaLiteChart"]'
WAIT = 60_000
SAME = ["gt_grpo", "majority_voting", "entropy"]  # three runs with one evaluation curve, a fourth apart


def _open(page: Any, url: str, title: str) -> None:
    page.goto(url)
    page.wait_for_selector(f"h1:has-text('{title}')", timeout=WAIT)
    page.wait_for_selector(f"{CHART} svg", timeout=WAIT)


def _coinciding_store(root: Path) -> Path:
    """Four runs on MATH: gt_grpo, majority_voting and entropy scoring the same at each step, self_certainty not."""
    dirs = []
    for method in [*SAME, "self_certainty"]:
        run = root / method
        (run / "eval").mkdir(parents=True)
        cell = f"method: {{name: {method}}}\nbase_model: {{name: qwen3-8b-base}}\ndataset: {{name: math}}\n"
        (run / "config.yaml").write_text("backend: local\n" + cell)
        (run / "metrics.jsonl").write_text('{"step": 1, "reward_mean": 0.5}\n')
        (run / "run.json").write_text(json.dumps({"status": "finished", "started_at": "2026-01-01T00:00:00Z"}))
        value = 0.3 if method == "self_certainty" else 0.6
        frame = pd.DataFrame(
            {"step": [10, 20], "benchmark": "math500", "checker": "math_verify", "metric": "pass@1", "n": 8}
        ).assign(value=[value, value + 0.1], ci_low=[value - 0.05, value + 0.05], ci_high=[value + 0.05, value + 0.15])
        frame.to_parquet(run / "eval" / "metrics.parquet")
        dirs.append(run)
    ingest(root / "results.duckdb", run_dirs=dirs)
    return root / "results.duckdb"


def _y_axes(page: Any) -> list[str]:
    """The aria labels Vega gives the chart's y axes ("Y-axis for a log scale with values from ...")."""
    labels = page.locator(f'{CHART} g[aria-label^="Y-axis"]')
    return [str(labels.nth(i).get_attribute("aria-label")) for i in range(labels.count())]


def _boxes_overlap(a: dict[str, float], b: dict[str, float]) -> bool:
    return not (
        a["x"] + a["width"] <= b["x"]
        or b["x"] + b["width"] <= a["x"]
        or a["y"] + a["height"] <= b["y"]
        or b["y"] + b["height"] <= a["y"]
    )


def _log_scale_kept_across_a_reload(page: Any, url: str, shots: Path) -> None:
    _open(page, f"{url}/curves?metrics=response_length_mean&metrics=reward_mean", "Training curves")
    page.wait_for_selector(f'{CHART} g[aria-label^="Y-axis for a linear scale"]', timeout=WAIT)
    page.get_by_text("Log y axis", exact=True).click()
    page.wait_for_url("**log_y=true**", timeout=WAIT)  # the choice is written to the URL
    page.reload()
    page.wait_for_selector("h1:has-text('Training curves')", timeout=WAIT)
    page.wait_for_selector(f'{CHART} g[aria-label^="Y-axis for a log scale"]', timeout=WAIT)
    axes = _y_axes(page)
    assert axes and all(a.startswith("Y-axis for a log scale") for a in axes), axes  # every panel, after the reload
    assert page.locator('label:has-text("Log y axis") input[type="checkbox"]').first.is_checked()
    page.locator(CHART).first.scroll_into_view_if_needed()
    shoot(page, shots, "curves-log-scale")


FIRST_Y = f'{CHART} g.concat_0_group g[aria-label^="Y-axis"]'  # the first panel's y axis


def _y_ticks(page: Any) -> list[str]:
    ticks = page.locator(f"{FIRST_Y} g.role-axis-label text")
    return [str(ticks.nth(i).text_content()) for i in range(ticks.count())]


def _zoom_y(page: Any, url: str) -> None:
    """With "Zoom y too", scrolling over a panel zooms its values (its y axis's ticks change), not only the steps."""
    _open(page, f"{url}/curves?zoom_y=true&metrics=reward_mean", "Training curves")
    axis = page.locator(FIRST_Y)
    axis.wait_for(timeout=WAIT)
    before = _y_ticks(page)
    changed = f"""(before) => JSON.stringify([...document.querySelectorAll(
        '{FIRST_Y} g.role-axis-label text')].map(t => t.textContent)) !== before"""
    wheel_until(page, axis.bounding_box(), changed, json.dumps(before, separators=(",", ":")))
    after = _y_ticks(page)
    assert float(after[-1]) - float(after[0]) < float(before[-1]) - float(before[0]), (before, after)  # zoomed in


def _chart_fills_the_page(page: Any) -> None:
    """The curves chart spans most of the content width (it used half)."""
    widths = page.evaluate(
        f"""() => {{ const svg = document.querySelector('{CHART} svg');
        const box = svg.closest('[data-testid="stElementContainer"]');
        return [box.getBoundingClientRect().width, svg.getBoundingClientRect().width]; }}"""
    )
    assert widths[1] >= 0.8 * widths[0], widths
    assert widths[1] <= widths[0] + 1, widths  # and is not cut


def _export(page: Any, shots: Path, tmp: Path) -> None:
    """Both buttons under the chart download a real image."""
    for fmt, magic in (("PNG", b"\x89PNG\r\n\x1a\n"), ("SVG", b"<svg")):
        with page.expect_download(timeout=WAIT) as download:
            page.get_by_role("button", name=f"Chart as {fmt}").click()
        saved = tmp / download.value.suggested_filename
        download.value.save_as(saved)
        assert saved.name == f"training-curves.{fmt.lower()}"
        assert saved.read_bytes().startswith(magic), saved.read_bytes()[:16]
        assert saved.stat().st_size > 5_000
    shoot(page, shots, "curves-export")


def _live_refresh(page: Any, url: str) -> None:
    """With live refresh on, the page reads the store again by itself (the time in its caption changes)."""
    _open(page, f"{url}/curves?live=true&every=2", "Training curves")
    caption = page.get_by_text("Read from the store at").first
    caption.wait_for(timeout=WAIT)
    first = caption.inner_text()
    assert "again every 2 s" in first, first
    page.wait_for_function(
        """(first) => [...document.querySelectorAll('[data-testid="stCaptionContainer"]')]
        .some(c => c.innerText.startsWith('Read from the store at') && c.innerText !== first)""",
        arg=first,
        timeout=WAIT,
    )
    assert page.locator(f"{CHART} svg").count() == 1  # the chart is still there, drawn again


def _dark_legend(browser: Any, url: str, shots: Path) -> None:
    dark = browser.new_page(viewport={"width": 1400, "height": 1000}, color_scheme="dark")
    _open(dark, f"{url}/curves", "Training curves")
    background = dark.evaluate("getComputedStyle(document.querySelector('.stApp')).backgroundColor")
    assert background != "rgb(255, 255, 255)", background  # the dark theme is on
    swatches = dark.locator(f"{CHART} g.role-legend-symbol path")
    swatches.first.wait_for(state="attached", timeout=WAIT)  # a horizontal stroke: no height, never "visible"
    drawn = [
        swatches.nth(i).evaluate(
            """p => { const s = getComputedStyle(p); const b = p.getBoundingClientRect();
            return {stroke: p.getAttribute('stroke'), width: parseFloat(s.strokeWidth),
                    opacity: parseFloat(s.opacity) * parseFloat(s.strokeOpacity), length: b.width}; }"""
        )
        for i in range(swatches.count())
    ]
    colours = {c.lower() for c in METHOD_COLOURS.values()}
    assert len(drawn) == 6, drawn  # one per run of the first setting
    for swatch in drawn:  # the method's colour (2:1 or more on the dark background), a thick, opaque, long stroke
        assert str(swatch["stroke"]).lower() in colours, swatch
        assert swatch["width"] >= 3 and swatch["opacity"] == 1 and swatch["length"] >= 15, swatch
    dark.locator(f"{CHART} g.role-legend").first.scroll_into_view_if_needed()
    shoot(dark, shots, "curves-dark-legend")
    dark.close()


def _matrix_at_1400(page: Any, url: str, shots: Path) -> None:
    _open(page, f"{url}/", "Matrix")
    headers = page.locator(f'{CHART} g[aria-label^="X-axis"] g.role-axis-label text')
    headers.first.wait_for(timeout=WAIT)
    boxes = [headers.nth(i).bounding_box() for i in range(headers.count())]
    assert len(boxes) == 7, boxes
    for left, right in itertools.pairwise(boxes):
        assert not _boxes_overlap(left, right), (left, right)  # no header collides with the next
    rows = page.locator(f'{CHART} g[aria-label^="Y-axis"] g.role-axis-label text')
    shown = [rows.nth(i).get_attribute("opacity") != "0" for i in range(rows.count())]
    assert len(shown) == 11 and all(shown), shown  # every row label drawn (none culled for want of height)
    container = page.locator(CHART).first.bounding_box()
    legend = page.locator(f"{CHART} g.role-legend").first.bounding_box()
    assert legend["x"] + legend["width"] <= container["x"] + container["width"] + 1, (legend, container)
    assert legend["x"] + legend["width"] <= 1400, legend  # inside the window
    shoot(page, shots, "matrix-1400")


def test_chart_controls_export_refresh_and_legibility(chromium: str, synthetic_store: Path, tmp_path: Path) -> None:
    shots = screenshots_dir(tmp_path)
    coinciding = _coinciding_store(tmp_path / "coinciding")
    with chromium_browser(chromium) as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
        with dashboard_server(synthetic_store) as url:
            _zoom_y(page, url)
            _log_scale_kept_across_a_reload(page, url, shots)
            _chart_fills_the_page(page)
            _export(page, shots, tmp_path)
            _matrix_at_1400(page, url, shots)
            _dark_legend(browser, url, shots)
            _live_refresh(page, url)
        with dashboard_server(coinciding) as url:
            _open(
                page,
                f"{url}/curves?source=evaluation+by+checkpoint&methods="
                + "&methods=".join([*SAME, "self_certainty"])
                + "&base_models=qwen3-8b-base",
                "Training curves",
            )
            note = page.locator(f"{CHART} g.mark-text text", has_text="runs coincide")
            note.first.wait_for(timeout=WAIT)
            assert note.first.text_content() == "3 runs coincide"
            caption = page.get_by_text("3 runs coincide (the same score").first.inner_text()
            assert all(m in caption for m in SAME) and "self_certainty" not in caption, caption
            bands = page.locator(f"{CHART} g.mark-area path")
            assert bands.count() == 2, bands.count()  # one for the three that coincide, one for the fourth
            shoot(page, shots, "eval-coinciding")
    print(f"screenshots in {shots}")
