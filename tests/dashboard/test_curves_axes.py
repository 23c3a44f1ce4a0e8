"""Issue 33 on the Training curves page (AppTest and the chart helpers): a log y axis, y zoom and a fixed y range, a
panel per metric and method, each choice read from the URL; identical evaluation curves drawn once with a note;
charts exported as PNG and SVG files; legend swatches drawn as thick opaque strokes."""

from __future__ import annotations

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from dashboard.curves_chart import YAxis, coinciding, curves_chart, eval_chart, export, run_labels, smooth
from tests.dashboard.test_curves import DEFAULT_PANELS
from tests.dashboard.test_pages import chart, render

PNG, SVG = b"\x89PNG\r\n\x1a\n", b"<svg"


def _layers(spec: dict) -> list[dict]:
    return list(spec["concat"][0]["layer"])


def _panels(spec: dict) -> list[str]:
    return [panel["title"]["text"] for panel in spec["concat"]]


def test_axis_choices_come_from_the_url_and_reach_the_chart(app: AppTest) -> None:
    app.query_params.update({"log_y": "true", "zoom_y": "true", "panels": "metric and method", "y_max": "0.9"})
    render(app, "views/curves.py")
    assert app.toggle(key="log_y").value and app.toggle(key="zoom_y").value
    assert app.selectbox(key="panels").value == "metric and method" and app.number_input(key="y_max").value == 0.9
    spec, data = chart(app)
    line = _layers(spec)[1]
    assert line["encoding"]["y"]["scale"] == {"type": "log", "nice": False, "domainMax": 0.9}
    assert {"filter": "(datum['smoothed'] > 0)"} in line["transform"]  # a log axis cannot draw 0
    zoom = spec["params"][0]
    assert zoom["select"]["encodings"] == ["x", "y"] and zoom["bind"] == "scales"
    assert spec["resolve"]["scale"]["y"] == "independent"  # every panel its own range
    panels = _panels(spec)
    assert panels[:2] == ["val_accuracy · gt_grpo", "val_accuracy · majority_voting"], panels
    assert "reward_mean (nats) · self_certainty" in panels and "reward_mean (0/1) · gt_grpo" in panels
    assert set(data.loc[data["kind"] == "curve", "panel"]) == set(panels) and len(panels) == 4 * 6

    app.toggle(key="log_y").set_value(False)
    app.selectbox(key="panels").set_value("metric").run()
    spec, _ = chart(app)
    assert _layers(spec)[1]["encoding"]["y"]["scale"]["type"] == "linear"
    assert _panels(spec) == DEFAULT_PANELS


def test_the_run_page_has_the_same_axis_choices_and_exports(app: AppTest) -> None:
    """The run page's training and evaluation charts take the y-axis choices from the URL and can be downloaded."""
    app.query_params.update({"run": "co_rewarding_2__qwen2.5-7b__math", "log_y": "true", "y_min": "0.05"})
    render(app, "views/run.py")
    training, _ = chart(app, 0)
    evaluation, _ = chart(app, 1)
    assert _layers(training)[1]["encoding"]["y"]["scale"] == {"type": "log", "nice": False, "domainMin": 0.05}
    assert any(layer["encoding"]["y"].get("scale", {}).get("type") == "log" for layer in _layers(evaluation))
    buttons = [b.label for b in app.get("download_button")]
    assert buttons[:4] == ["Chart as PNG", "Chart as SVG", "Chart as PNG", "Chart as SVG"], buttons
    app.toggle(key="log_y").set_value(False).run()
    assert _layers(chart(app, 0)[0])[1]["encoding"]["y"]["scale"]["type"] == "linear"


def _read_at(app: AppTest) -> list[str]:
    return [c.value for c in app.caption if c.value.startswith("Read from the store at")]


def test_live_refresh_is_off_unless_chosen_and_kept_in_the_url(app: AppTest) -> None:
    render(app, "views/curves.py")
    assert not app.sidebar.toggle(key="live").value and app.sidebar.number_input(key="every").disabled
    assert _read_at(app)[0].endswith(" UTC."), _read_at(app)
    app.sidebar.toggle(key="live").set_value(True).run()
    assert not app.sidebar.number_input(key="every").disabled
    assert _read_at(app)[0].endswith("UTC; again every 30 s."), _read_at(app)


def _evals(values: dict[str, float]) -> pd.DataFrame:
    rows = [
        {"run_id": run, "benchmark": "MATH500", "metric": "pass@1", "step": step, "value": v, "ci_low": v - 0.1}
        for run, v in values.items()
        for step in (10, 20)
    ]
    return pd.DataFrame(rows).assign(ci_high=lambda d: d["value"] + 0.1)


def _labels(run_ids: list[str]) -> pd.DataFrame:
    methods = ["gt_grpo", "entropy", "majority_voting", "self_certainty"]
    runs = pd.DataFrame(
        {"run_id": run_ids, "cell_id": run_ids, "method": methods[: len(run_ids)], "base_model": "q", "dataset": "m"}
    )
    return run_labels(runs)


def test_identical_evaluation_curves_draw_one_band_and_a_note() -> None:
    evals = _evals({"a": 0.5, "b": 0.5, "c": 0.5, "d": 0.7})
    labels = _labels(["a", "b", "c", "d"])
    same = coinciding(evals, labels)
    assert same[["facet", "runs", "drawn"]].values.tolist() == [["MATH500 pass@1", 3, "b"]]  # the first by label
    assert same["labels"][0] == "entropy · q · m, gt_grpo · q · m, majority_voting · q · m"
    spec = eval_chart(evals, labels).to_dict()
    data = pd.DataFrame(spec["datasets"][spec["data"]["name"]])
    banded = data[(data["kind"] == "eval") & data["band"].astype(bool)]
    assert sorted(banded["run_id"].unique()) == ["b", "d"]  # one band for the three that coincide
    assert data.loc[data["kind"] == "note", "note"].tolist() == ["3 runs coincide"]
    assert coinciding(_evals({"a": 0.5, "b": 0.6}), _labels(["a", "b"])).empty


def test_a_chart_exports_as_png_and_svg_and_its_legend_swatches_are_opaque_strokes() -> None:
    curves = pd.DataFrame({"run_id": ["a"] * 3 + ["b"] * 3, "metric": "reward_mean", "step": [1, 2, 3] * 2}).assign(
        value=[0.1, 0.5, 1.0, 10.0, 12.0, 13.5], wall_hours=None
    )
    labels = _labels(["a", "b"])
    made = curves_chart(smooth(curves, 0.0), pd.DataFrame(), labels, ["reward_mean"], y=YAxis(log=True))
    assert export(made, "png").startswith(PNG)
    svg = export(made, "svg")
    assert svg.startswith(SVG) and b"reward_mean" in svg
    with pytest.raises(ValueError, match="export format 'pdf'"):
        export(made, "pdf")
    legend = _layers(made.to_dict())[1]["encoding"]["color"]["legend"]
    assert (legend["symbolType"], legend["symbolOpacity"], legend["symbolStrokeWidth"]) == ("stroke", 1, 4)
