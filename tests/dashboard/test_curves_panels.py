"""Issue 45 on the chart specs: each panel of a curves chart zooms and pans on its own (its own param, bound to its
own scales), and a reward never shares a panel with a reward of another unit (Self-Certainty's nats beside the 0/1
rewards flattened them)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import altair as alt
import pandas as pd
import pytest
import vl_convert as vlc

from dashboard.curves_chart import (
    YAxis,
    curves_chart,
    eval_chart,
    group_bands,
    grouped_chart,
    run_labels,
    smooth,
    with_panels,
)

METHODS = {"a": "majority_voting", "b": "self_certainty"}
REWARDS = {"a": [0.3, 0.6, 0.9], "b": [13.2, 13.4, 13.6]}  # 0/1 and nats
METRICS = ["val_accuracy", "reward_mean", "label_accuracy", "response_length_mean"]


def _runs() -> pd.DataFrame:
    return pd.DataFrame({"run_id": list(METHODS), "cell_id": list(METHODS), "method": list(METHODS.values())}).assign(
        base_model="q", dataset="m"
    )


def _curves() -> pd.DataFrame:
    rows = [
        {"run_id": run, "metric": metric, "step": step, "value": value, "wall_hours": step / 60}
        for run in METHODS
        for metric in METRICS
        for step, value in zip(
            (1, 2, 3),
            REWARDS[run] if metric == "reward_mean" else [19.0, 18.5, 18.0] if "length" in metric else [0.2, 0.4, 0.3],
            strict=True,
        )
    ]
    return smooth(pd.DataFrame(rows), 0.0)


def _evals() -> pd.DataFrame:
    rows = [
        {"run_id": run, "benchmark": bench, "metric": "pass@1", "step": step, "value": v, "ci_low": v - 0.1}
        for run, v in (("a", 0.4), ("b", 0.6))
        for bench in ("AMC", "MATH500")
        for step in (10, 20)
    ]
    return pd.DataFrame(rows).assign(ci_high=lambda d: d["value"] + 0.1)


def _curves_spec(y: YAxis) -> alt.ConcatChart:
    return curves_chart(_curves(), pd.DataFrame(), run_labels(_runs()), METRICS, y=y)


def _grouped_spec(y: YAxis) -> alt.ConcatChart:
    curves, runs = _curves(), _runs()
    return grouped_chart(group_bands(curves, runs, "method"), curves, runs, "method", METRICS, y=y)


def _eval_spec(y: YAxis) -> alt.ConcatChart:
    return eval_chart(_evals(), run_labels(_runs()), y=y)


CHARTS: dict[str, Callable[[YAxis], alt.ConcatChart]] = {
    "training": _curves_spec,
    "grouped": _grouped_spec,
    "evaluation": _eval_spec,
}


def _view_names(panel: dict[str, Any]) -> set[str]:
    return {layer["name"] for layer in panel["layer"] if "name" in layer}


@pytest.mark.parametrize("log", [False, True], ids=["linear", "log"])
@pytest.mark.parametrize("kind", list(CHARTS))
def test_each_panel_has_its_own_zoom_bound_to_its_own_scales(kind: str, log: bool) -> None:
    """One interval param per panel, bound to the scales of that panel alone; compiled to Vega, each panel's x and y
    domains follow its own param's signal (a facet compiled to one signal that every panel's y domain followed)."""
    spec = CHARTS[kind](YAxis(log=log, zoom_y=True)).to_dict()
    panels, params = spec["concat"], spec["params"]
    assert len(panels) >= 2 and len(params) == len(panels)
    assert spec["resolve"]["scale"] == {"x": "independent", "y": "independent"}
    for i, (panel, param) in enumerate(zip(panels, params, strict=True)):
        assert param["bind"] == "scales" and param["select"] == {"type": "interval", "encodings": ["x", "y"]}
        (view,) = param["views"]  # one view, and it is this panel's
        assert view in _view_names(panel) and all(view not in _view_names(p) for j, p in enumerate(panels) if j != i)
    assert len({p["name"] for p in params}) == len(params)

    vega = vlc.vegalite_to_vega(spec)
    domains = {s["name"]: s.get("domainRaw", {}).get("signal") for s in vega["scales"]}
    for i, param in enumerate(params):  # "zoom_<i>[<the field>]"
        assert str(domains[f"concat_{i}_x"]).startswith(f"{param['name']}["), domains
        assert str(domains[f"concat_{i}_y"]).startswith(f"{param['name']}["), domains
    y_signals = [domains[f"concat_{i}_y"] for i in range(len(panels))]
    assert len(set(y_signals)) == len(panels)  # no two panels' y ranges follow one selection


def test_without_zoom_y_each_panel_still_pans_its_steps_alone() -> None:
    spec = _curves_spec(YAxis()).to_dict()
    assert [p["select"]["encodings"] for p in spec["params"]] == [["x"]] * len(spec["concat"])
    domains = {s["name"]: s.get("domainRaw") for s in vlc.vegalite_to_vega(spec)["scales"]}
    assert domains["concat_0_x"] == {"signal": 'zoom_0["step"]'} and domains["concat_1_x"] == {
        "signal": 'zoom_1["step"]'
    }
    assert domains["concat_0_y"] is None  # y is fitted to each panel's data, not zoomed


def test_the_panels_start_from_the_steps_of_every_run() -> None:
    """Each panel has its own x scale, yet all start on the steps of all runs: a reward panel whose only run stopped
    at step 2 still spans steps 1 to 3, lined up with the others (drawn by Vega, read from its axes)."""
    curves = _curves()
    short = curves[(curves["run_id"] == "a") | (curves["step"] < 3)]  # self_certainty (b) stopped at step 2
    svg = vlc.vegalite_to_svg(curves_chart(short, pd.DataFrame(), run_labels(_runs()), METRICS).to_dict())
    axes = re.findall(r"aria-label=\"X-axis titled 'step' for a linear scale with values from (\S+) to (\S+)\"", svg)
    assert [(float(low), float(high)) for low, high in axes] == [(1.0, 3.0)] * 5, axes
    domains = {s["name"]: s.get("domainRaw") for s in vlc.vegalite_to_vega(_curves_spec(YAxis()).to_dict())["scales"]}
    assert domains["concat_2_x"] == {"signal": 'zoom_2["step"]'}  # and each still zooms on its own


def _panel_rows(spec: dict[str, Any]) -> dict[str, pd.DataFrame]:
    """Each panel's title and the rows of the chart's data its filter keeps."""
    data = pd.DataFrame(spec["datasets"][spec["data"]["name"]])
    rows = {}
    for panel in spec["concat"]:
        (kept,) = [t["filter"] for t in panel["transform"] if "filter" in t]
        assert kept["field"] == "panel"
        rows[panel["title"]["text"]] = data[data["panel"] == kept["equal"]]
    return rows


def test_self_certainty_and_majority_voting_get_a_reward_panel_each() -> None:
    """Compared, a Self-Certainty run (nats, ~13.4) and a Majority-Voting run (0/1) draw their rewards in two panels,
    one unit each; the other metrics keep one panel for both runs."""
    rows = _panel_rows(_curves_spec(YAxis()).to_dict())
    assert list(rows) == [
        "val_accuracy",
        "reward_mean (0/1)",
        "reward_mean (nats)",
        "label_accuracy",
        "response_length_mean",
    ]
    for title, unit, method, low, high in (
        ("reward_mean (0/1)", "0/1", "majority_voting", 0.3, 0.9),
        ("reward_mean (nats)", "nats", "self_certainty", 13.2, 13.6),
    ):
        curve = rows[title][rows[title]["kind"] == "curve"]
        assert set(curve["unit"]) == {unit} and set(curve["method"]) == {method}
        assert (curve["value"].min(), curve["value"].max()) == (low, high)
    assert set(rows["val_accuracy"]["method"]) == {"majority_voting", "self_certainty"}


def test_a_group_of_mixed_units_gets_a_band_per_unit() -> None:
    """Grouped by base model (one group of both runs), the reward is not averaged across units: a band per unit,
    each in its own panel; panels per metric and group split the same way."""
    curves, runs = _curves(), _runs()
    bands = group_bands(curves, runs, "base_model")
    reward = bands[bands["metric"] == "reward_mean"].set_index(["unit", "step"])["mean"]
    assert reward[("nats", 3)] == 13.6 and reward[("0/1", 3)] == 0.9  # not (13.6 + 0.9) / 2
    assert set(bands.loc[bands["metric"] == "val_accuracy", "unit"]) == {""}
    for panels in ("metric", "metric and method"):
        spec = grouped_chart(bands, curves, runs, "base_model", METRICS, panels=panels).to_dict()
        rows = _panel_rows(spec)
        suffix = " · q" if panels == "metric and method" else ""
        assert [t for t in rows if t.startswith("reward_mean")] == [
            f"reward_mean (0/1){suffix}",
            f"reward_mean (nats){suffix}",
        ]
        for title, drawn in rows.items():
            assert drawn["unit"].nunique() == 1, (title, set(drawn["unit"]))


def test_panel_order_puts_units_in_the_registry_order() -> None:
    data = pd.DataFrame(
        {"metric": "reward_mean", "method": ["entropy", "x_unknown", "self_certainty", "gt_grpo", "co_rewarding_2"]}
    )
    framed, order = with_panels(data, ["reward_mean"], "metric")
    assert order == ["reward_mean (0/1)", "reward_mean (nats)", "reward_mean (-nats)", "reward_mean (?)"]
    assert framed.loc[framed["method"] == "co_rewarding_2", "panel"].item() == "reward_mean (0/1)"
    _, order = with_panels(data.assign(metric="lr"), ["lr"], "metric")
    assert order == ["lr"]  # a metric that is not a reward has no unit
