"""The run-comparison chart of the Training curves page: EMA-smoothed curves over faint raw ones, one facet per
metric, coloured by method, collapse onsets marked. Pure functions of DataFrames (tested without Streamlit)."""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import numpy as np
import pandas as pd

from dashboard.common import METHOD_COLOURS, method_colour

X_FIELDS = {"step": ("step", "step"), "wall time": ("wall_hours", "wall time (hours)")}
FACET_WIDTH = 860  # px the facets of one row share (the page's content width at a 1400 px window with the sidebar)


def ema(values: np.ndarray, weight: float) -> np.ndarray:
    """Exponential moving average (TensorBoard's smoothing): s[0] = v[0], s[t] = w s[t-1] + (1 - w) v[t].

    >>> ema(np.array([0.0, 1.0, 1.0]), 0.5).tolist()
    [0.0, 0.5, 0.75]
    """
    return pd.Series(values, dtype=float).ewm(alpha=_alpha(weight), adjust=False).mean().to_numpy()


def _alpha(weight: float) -> float:
    if not 0.0 <= weight < 1.0:
        raise ValueError(f"EMA weight must be in [0, 1), got {weight}")
    return 1.0 - weight


def smooth(curves: pd.DataFrame, weight: float) -> pd.DataFrame:
    """``curves`` without NaN values, with ``smoothed``: the EMA of each run's metric over its steps."""
    data = curves[curves["value"].notna()].sort_values(["run_id", "metric", "step"], ignore_index=True)
    by_curve = data.astype({"value": float}).groupby(["run_id", "metric"], sort=False)["value"]
    data["smoothed"] = by_curve.ewm(alpha=_alpha(weight), adjust=False).mean().droplevel([0, 1])
    return data


def run_labels(runs: pd.DataFrame) -> pd.DataFrame:
    """run_id, method, setting (base model · dataset) and label (method · base model · dataset, plus the run's
    hash when a cell has several runs) of each run in ``runs``."""
    out = runs[["run_id", "cell_id", "method", "base_model", "dataset"]].copy()
    out["setting"] = out["base_model"] + " · " + out["dataset"]
    out["label"] = out["method"] + " · " + out["setting"]
    several = out["cell_id"].duplicated(keep=False)
    out.loc[several, "label"] += " @" + out.loc[several, "run_id"].str.rsplit("@", n=1).str[-1]
    return out.drop(columns="cell_id")


def onset_marks(events: pd.DataFrame, curves: pd.DataFrame) -> pd.DataFrame:
    """Each collapse onset on every metric's curve of its run: the point at or before the onset step."""
    if events.empty or curves.empty:
        return curves.head(0).assign(rule="", detail="")
    onsets = events.rename(columns={"step": "onset"}).astype({"onset": "int64"}).sort_values("onset")
    points = curves.astype({"step": "int64"}).sort_values("step")
    rows = []
    for metric, mine in points.groupby("metric"):
        hit = pd.merge_asof(onsets, mine, left_on="onset", right_on="step", by="run_id", direction="backward").dropna(
            subset=["step"]
        )
        rows.append(hit.assign(metric=metric))
    marks = pd.concat(rows, ignore_index=True) if rows else curves.head(0).assign(rule="", detail="")
    return marks.drop(columns="onset", errors="ignore")


def _colour(labels: pd.DataFrame) -> alt.Color:
    rank = {m: i for i, m in enumerate(METHOD_COLOURS)}
    order = labels.assign(rank=labels["method"].map(rank).fillna(len(rank))).sort_values(["rank", "setting", "label"])
    scale = alt.Scale(domain=list(order["label"]), range=[method_colour(m) for m in order["method"]])
    legend = alt.Legend(
        title="run (method · base model · dataset)",
        labelLimit=0,
        titleLimit=0,
        orient="bottom",
        columns=2,
        symbolOpacity=1,
        symbolStrokeWidth=3,
    )
    return alt.Color("label:N", scale=scale, legend=legend)


def curves_chart(
    curves: pd.DataFrame,
    events: pd.DataFrame,
    labels: pd.DataFrame,
    metrics: Sequence[str],
    x: str = "step",
    columns: int = 4,
) -> alt.FacetChart:
    """One facet per metric (``columns`` a row, own y scales): raw lines faint, smoothed lines over them, collapse
    onsets as dashed rules and diamonds; zoom and pan on x. ``curves`` needs ``smoothed`` (see smooth)."""
    field, title = X_FIELDS[x]
    data = curves.merge(labels, on="run_id")
    marks = onset_marks(events, curves).merge(labels, on="run_id")
    both = pd.concat([data.assign(kind="curve"), marks.assign(kind="onset")], ignore_index=True)
    colour = _colour(labels)
    dash = (
        alt.StrokeDash("setting:N", legend=alt.Legend(title="base model · dataset", labelLimit=0, orient="bottom"))
        if labels["setting"].nunique() > 1
        else alt.value([1, 0])
    )
    base = alt.Chart().encode(x=alt.X(f"{field}:Q", title=title), color=colour)
    curve, onset = alt.datum.kind == "curve", alt.datum.kind == "onset"
    tips = [
        alt.Tooltip("label:N", title="run"),
        alt.Tooltip("step:Q"),
        alt.Tooltip("wall_hours:Q", title="wall time (h)", format=".2f"),
        alt.Tooltip("value:Q", title="raw", format=".4f"),
        alt.Tooltip("smoothed:Q", format=".4f"),
    ]
    raw = (
        base.transform_filter(curve)
        .mark_line(opacity=0.25, strokeWidth=1)
        .encode(y=alt.Y("value:Q", title=None), detail="label:N")
    )
    line = (
        base.transform_filter(curve).mark_line(strokeWidth=2).encode(y=alt.Y("smoothed:Q", title=None), strokeDash=dash)
    )
    hover = base.transform_filter(curve).mark_circle(size=50, opacity=0.01).encode(y="smoothed:Q", tooltip=tips)
    rule = base.transform_filter(onset).mark_rule(strokeDash=[5, 3], strokeWidth=1.5)
    diamond = (
        base.transform_filter(onset)
        .mark_point(shape="diamond", size=130, filled=True, stroke="white", opacity=1)
        .encode(y="smoothed:Q", tooltip=["label:N", "rule:N", "step:Q", "detail:N"])
    )
    width = max(140, FACET_WIDTH // max(1, columns) - 60)
    zoom = alt.selection_interval(bind="scales", encodings=["x"])  # drag to pan, scroll to zoom the steps
    layers = alt.layer(raw.add_params(zoom), line, hover, rule, diamond).properties(width=width, height=230)
    facet = alt.Facet("metric:N", sort=list(metrics), title=None, header=alt.Header(labelFontSize=13))
    return alt.FacetChart(data=both, spec=layers, facet=facet, columns=columns).resolve_scale(y="independent")


def eval_chart(evals: pd.DataFrame, labels: pd.DataFrame, columns: int = 4) -> alt.FacetChart:
    """Evaluation by checkpoint step: one facet per benchmark and metric, a line per run with its bootstrap interval
    as a band; zoom and pan on x (drag, scroll)."""
    data = evals.merge(labels, on="run_id").assign(facet=lambda d: d["benchmark"] + " " + d["metric"])
    colour = _colour(labels)
    zoom = alt.selection_interval(bind="scales", encodings=["x"])
    base = alt.Chart().encode(x=alt.X("step:Q", title="checkpoint step"), color=colour)
    band = base.mark_area(opacity=0.2).encode(y=alt.Y("ci_low:Q", title=None), y2="ci_high:Q", detail="label:N")
    line = base.mark_line(point=True, strokeWidth=2).encode(
        y=alt.Y("value:Q", title=None),
        tooltip=["label:N", "step:Q", alt.Tooltip("value:Q", format=".4f"), "ci_low:Q", "ci_high:Q"],
    )
    width = max(140, FACET_WIDTH // max(1, columns) - 60)
    layers = alt.layer(band, line).add_params(zoom).properties(width=width, height=200)
    facet = alt.Facet("facet:N", title=None, header=alt.Header(labelFontSize=13))
    return alt.FacetChart(data=data, spec=layers, facet=facet, columns=columns).resolve_scale(y="independent")


GROUPS = {"method": "method", "base model": "base_model", "dataset": "dataset"}


BANDS = ("min-max", "mean ± std")


def group_bands(
    curves: pd.DataFrame, runs: pd.DataFrame, by: str, y: str = "smoothed", band: str = "min-max"
) -> pd.DataFrame:
    """Per group (the runs' ``by`` column), metric and step: the mean of ``y`` over the group's runs and its band,
    min to max or the mean ± the sample standard deviation (the spread across seeds when a cell has several runs;
    0 for a single run). Columns: group, metric, step, mean, low, high, runs.

    >>> c = pd.DataFrame({"run_id": ["a", "b", "c"], "metric": "m", "step": 1, "smoothed": [1.0, 2.0, 6.0]})
    >>> r = pd.DataFrame({"run_id": ["a", "b", "c"], "method": "x"})
    >>> group_bands(c, r, "method")[["mean", "low", "high"]].values.tolist()
    [[3.0, 1.0, 6.0]]
    >>> group_bands(c, r, "method", band="mean ± std")[["mean", "low", "high"]].round(3).values.tolist()
    [[3.0, 0.354, 5.646]]
    """
    if band not in BANDS:
        raise ValueError(f"band={band!r}: one of {', '.join(BANDS)}")
    data = curves.merge(runs[["run_id", by]], on="run_id").rename(columns={by: "group"})
    stats = data.groupby(["group", "metric", "step"], sort=True)[y].agg(["mean", "min", "max", "std", "count"])
    if band == "mean ± std":
        spread = stats["std"].fillna(0.0)
        stats["min"], stats["max"] = stats["mean"] - spread, stats["mean"] + spread
    stats = stats.drop(columns="std")
    return stats.rename(columns={"min": "low", "max": "high", "count": "runs"}).reset_index()


def grouped_chart(
    bands: pd.DataFrame, curves: pd.DataFrame, runs: pd.DataFrame, by: str, metrics: Sequence[str], columns: int = 4
) -> alt.FacetChart:
    """One facet per metric: each group's mean line over its min-max band, the single runs faint behind; a legend of
    the groups only (readable however many runs), zoom and pan on x."""
    groups = list(dict.fromkeys(bands["group"]))
    coloured = by == "method"
    scale = alt.Scale(domain=groups, range=[method_colour(g) for g in groups]) if coloured else alt.Scale()
    colour = alt.Color("group:N", title=by, scale=scale, legend=alt.Legend(orient="bottom", labelLimit=0))
    faint = curves.merge(runs[["run_id", by]], on="run_id").rename(columns={by: "group"})
    both = pd.concat([bands.assign(kind="band"), faint.assign(kind="run")], ignore_index=True)
    zoom = alt.selection_interval(bind="scales", encodings=["x"])
    base = alt.Chart().encode(x=alt.X("step:Q", title="step"), color=colour)
    is_band, is_run = alt.datum.kind == "band", alt.datum.kind == "run"
    single = (
        base.transform_filter(is_run).mark_line(opacity=0.12, strokeWidth=1).encode(y="smoothed:Q", detail="run_id:N")
    )
    area = base.transform_filter(is_band).mark_area(opacity=0.25).encode(y=alt.Y("low:Q", title=None), y2="high:Q")
    mean = (
        base.transform_filter(is_band)
        .mark_line(strokeWidth=2.5)
        .encode(
            y="mean:Q", tooltip=["group:N", "step:Q", alt.Tooltip("mean:Q", format=".4f"), "low:Q", "high:Q", "runs:Q"]
        )
    )
    width = max(140, FACET_WIDTH // max(1, columns) - 60)
    layers = alt.layer(single, area, mean).add_params(zoom).properties(width=width, height=230)
    facet = alt.Facet("metric:N", sort=list(metrics), title=None, header=alt.Header(labelFontSize=13))
    return alt.FacetChart(data=both, spec=layers, facet=facet, columns=columns).resolve_scale(y="independent")
