"""The Training curves page: runs chosen by facets, one chart with a panel per metric, EMA smoothing, wall time,
method colours, full legend labels and collapse onsets; and the chart's pure helpers on hand-made frames."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from dashboard.common import METHOD_COLOURS, method_colour
from dashboard.curves_chart import ema, onset_marks, run_labels, smooth
from tests.dashboard.test_pages import chart, render

DEFAULTS = {"val_accuracy", "reward_mean", "label_accuracy", "response_length_mean"}
DEFAULT_PANELS = [
    "val_accuracy",
    "reward_mean (0/1)",
    "reward_mean (nats)",
    "reward_mean (-nats)",
    "label_accuracy",
    "response_length_mean",
]


def test_curves_page_compares_the_methods_of_one_setting(app: AppTest) -> None:
    render(app, "views/curves.py")
    assert app.title[0].value == "Training curves"
    assert (app.multiselect(key="base_models").value, app.multiselect(key="datasets").value) == (
        ["qwen2.5-3b"],
        ["math"],
    )
    assert app.multiselect(key="methods").value == list(METHOD_COLOURS)[:6]  # every method, in palette order
    assert len(app.get("vega_lite_chart")) == 1
    spec, data = chart(app)
    assert spec["columns"] == 4 and set(data["metric"]) == DEFAULTS
    assert [panel["title"]["text"] for panel in spec["concat"]] == DEFAULT_PANELS  # a reward's panel per unit
    colour = spec["concat"][0]["layer"][1]["encoding"]["color"]
    labels = colour["scale"]["domain"]
    assert colour["legend"]["labelLimit"] == 0 and len(labels) == 6
    assert labels[1] == "majority_voting · qwen2.5-3b · math"  # the full label, never cut
    assert colour["scale"]["range"] == [METHOD_COLOURS[label.split(" · ")[0]] for label in labels]
    curves, onsets = data[data["kind"] == "curve"], data[data["kind"] == "onset"]
    assert (curves["smoothed"] - curves["value"]).abs().max() > 0.01  # smoothing shows on the lines
    assert {"majority_voting · qwen2.5-3b · math", "entropy · qwen2.5-3b · math"} <= set(onsets["label"])
    assert not onsets["label"].str.startswith(("gt_grpo", "co_rewarding_2")).any()
    assert set(onsets["metric"]) == DEFAULTS  # each onset marked on every chart of its run
    events = app.dataframe[0].value
    assert set(events["rule"][events["run_id"].str.startswith("majority_voting")]) >= {"val_drop"}

    app.slider(key="ema").set_value(0.0)
    app.radio(key="x_axis").set_value("wall time").run()
    spec, data = chart(app)
    assert spec["concat"][0]["layer"][0]["encoding"]["x"]["field"] == "wall_hours"
    curves = data[data["kind"] == "curve"]
    assert np.allclose(curves["smoothed"], curves["value"])
    gt = curves[(curves["label"] == "gt_grpo · qwen2.5-3b · math") & (curves["metric"] == "reward_mean")]
    assert gt["wall_hours"].is_monotonic_increasing and 30 * 60 / 3600 < gt["wall_hours"].max() < 30 * 71 / 3600

    app.multiselect(key="base_models").set_value(["qwen2.5-3b", "qwen2.5-7b"])
    app.multiselect(key="methods").set_value(["gt_grpo", "entropy"]).run()
    spec, data = chart(app)
    assert len(spec["concat"][0]["layer"][1]["encoding"]["color"]["scale"]["domain"]) == 4
    assert spec["concat"][0]["layer"][1]["encoding"]["strokeDash"]["field"] == "setting"  # model · data told apart
    app.radio(key="scope").set_value("all runs").run()
    everything = app.dataframe[0].value
    assert set(everything.loc[everything["run_id"].str.startswith("entropy"), "rule"]) >= {"length_at_cap"}


def test_ema_labels_and_onset_marks() -> None:
    assert ema(np.array([1.0, 0.0, 0.0]), 0.0).tolist() == [1.0, 0.0, 0.0]
    assert ema(np.array([1.0, 0.0, 0.0]), 0.5).tolist() == [1.0, 0.5, 0.25]
    with pytest.raises(ValueError, match="EMA weight must be in"):
        ema(np.array([1.0]), 1.0)  # no new value would ever count
    curves = pd.DataFrame(
        {
            "run_id": ["a"] * 4 + ["b"] * 2,
            "metric": ["m", "m", "m", "n", "m", "m"],
            "step": [0, 2, 4, 4, 0, 2],
            "value": [0.0, 1.0, np.nan, 3.0, 2.0, 2.0],
        }
    )
    smoothed = smooth(curves, 0.5)
    assert smoothed[["run_id", "metric", "smoothed"]].values.tolist() == [
        ["a", "m", 0.0],
        ["a", "m", 0.5],
        ["a", "n", 3.0],
        ["b", "m", 2.0],
        ["b", "m", 2.0],
    ]
    nothing = smooth(curves.head(0), 0.5)
    assert nothing.empty and "smoothed" in nothing.columns
    runs = pd.DataFrame(
        {
            "run_id": ["x__y__z@11111111", "x__y__z@22222222", "gt_grpo__q__m@3"],
            "cell_id": ["x__y__z", "x__y__z", "gt_grpo__q__m"],
            "method": ["x", "x", "gt_grpo"],
            "base_model": ["y", "y", "q"],
            "dataset": ["z", "z", "m"],
        }
    )
    assert run_labels(runs)["label"].tolist() == ["x · y · z @11111111", "x · y · z @22222222", "gt_grpo · q · m"]
    events = pd.DataFrame({"run_id": ["a"], "rule": ["val_drop"], "step": [3], "detail": ["fell"]})
    marks = onset_marks(events, smoothed)
    assert marks[["metric", "step", "smoothed", "rule"]].values.tolist() == [["m", 2, 0.5, "val_drop"]]
    assert method_colour("majority_voting_rephrased") == METHOD_COLOURS["majority_voting"]
    assert method_colour("co_rewarding_2_frozen_teacher") == METHOD_COLOURS["co_rewarding_2"]


def _luminance(colour: str) -> float:
    """WCAG relative luminance of ``#rrggbb``."""
    channels = [int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


@pytest.mark.parametrize("background", ["#FFFFFF", "#0E1117"], ids=["light theme", "dark theme"])
def test_every_method_colour_stands_out_on_both_themes(background: str) -> None:
    """No curve disappears into the page: each method's colour has at least 2:1 contrast with Streamlit's light and
    dark backgrounds (GT's black had 1.1:1 on the dark one), and the seven are distinct."""
    for method, colour in METHOD_COLOURS.items():
        high, low = sorted([_luminance(colour), _luminance(background)], reverse=True)
        assert (high + 0.05) / (low + 0.05) >= 2.0, (method, colour, background)
    assert len(set(METHOD_COLOURS.values()) - {METHOD_COLOURS["base"]}) == len(METHOD_COLOURS) - 1
