"""The run-comparison chart of the Training curves page: EMA-smoothed curves over faint raw ones, one panel per
metric (a reward's panel per unit), coloured by method, collapse onsets marked. Each panel has its own scales and its
own zoom. Pure functions of DataFrames (tested without Streamlit)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import altair as alt
import numpy as np
import pandas as pd
import vl_convert as vlc

from corewarding.methods import REWARD_UNITS, reward_unit
from dashboard.common import METHOD_COLOURS, method_colour, visible

X_FIELDS = {"step": ("step", "step"), "wall time": ("wall_hours", "wall time (hours)")}
FACET_WIDTH = 900  # px the panels of one row share, axes aside (the page's content is 940 px at a 1400 px window)
PANELS = ("metric", "metric and method")  # one panel per metric, or per metric and method (each its own y range)
Y_LABELS = 48  # px kept for each panel's y tick labels: a zoom that lengthens them ("0.0305") does not cut them
REWARD_METRICS = ("reward_mean",)  # counted in the reward's unit of the run's method (0/1, nats, -nats): never mixed
EXPORTS = {"png": "image/png", "svg": "image/svg+xml"}


@dataclass(frozen=True)
class YAxis:
    """How the panels' y axes are drawn: linear or log, an explicit range (None: each panel its own, fitted to its
    data), and whether scrolling and dragging zoom y as well as x."""

    log: bool = False
    low: float | None = None
    high: float | None = None
    zoom_y: bool = False

    def scale(self) -> alt.Scale:
        """The y scale of every panel (a log scale drops a range end at or below 0)."""
        low = None if self.log and self.low is not None and self.low <= 0 else self.low
        limits: dict[str, Any] = {k: v for k, v in {"domainMin": low, "domainMax": self.high}.items() if v is not None}
        if self.log:
            return alt.Scale(type="log", nice=False, **limits)  # the data's range, not whole powers of 10
        return alt.Scale(type="linear", zero=False, **limits)

    def zoom(self, name: str) -> Any:
        """Drag to pan, scroll to zoom: the steps, and the values too with ``zoom_y``; ``name`` is the param's (one
        per panel: a param shared by several panels would set them all to the range zoomed in one)."""
        return alt.selection_interval(bind="scales", encodings=["x", "y"] if self.zoom_y else ["x"], name=name)


def legend(title: str | None, **extra: Any) -> alt.Legend:
    """A legend whose swatches are thick, opaque strokes, visible on the light and the dark theme alike."""
    style = dict(
        labelLimit=0,
        titleLimit=0,
        orient="bottom",
        symbolType="stroke",
        symbolSize=400,
        symbolStrokeWidth=4,
        symbolOpacity=1,
    )
    return alt.Legend(title=title, **{**style, **extra})


def export(chart: alt.ConcatChart, fmt: str) -> bytes:
    """The chart drawn as a PNG (twice the screen's resolution) or an SVG file, on a white background."""
    spec = chart.to_dict()
    spec.setdefault("config", {})["background"] = "white"
    if fmt == "png":
        return bytes(vlc.vegalite_to_png(spec, scale=2))
    if fmt == "svg":
        return str(vlc.vegalite_to_svg(spec)).encode()
    raise ValueError(f"export format {fmt!r}: one of {', '.join(EXPORTS)}")


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
    for shown in ("setting", "label"):  # what a legend or tooltip shows: no bidi or hidden character
        out[shown] = out[shown].map(visible)
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
    return alt.Color("label:N", scale=scale, legend=legend("run (method · base model · dataset)", columns=2))


def _method_order(methods: Sequence[str]) -> list[str]:
    """The methods in palette order, any other after them by name."""
    present = set(methods)
    return [m for m in METHOD_COLOURS if m in present] + sorted(present - set(METHOD_COLOURS))


def with_unit(data: pd.DataFrame) -> pd.DataFrame:
    """``data`` with ``unit``: on a reward metric's rows what its run's ``method`` rewards in (``0/1``, ``nats``,
    ``-nats``; ``?`` for an unknown method), "" on the other metrics' rows.

    >>> d = pd.DataFrame({"metric": ["reward_mean"] * 2 + ["lr"], "method": ["gt_grpo", "entropy", "gt_grpo"]})
    >>> with_unit(d)["unit"].tolist()
    ['0/1', '-nats', '']
    """
    methods = data["method"].astype(str)
    units = methods.map({m: reward_unit(m) for m in methods.unique()})
    return data.assign(unit=units.where(data["metric"].isin(REWARD_METRICS), "").astype(str))


def _unit_order(units: Sequence[str]) -> list[str]:
    """No unit ("") first, then the reward units as methods.REWARD_UNITS lists them, any other after them by name."""
    present = set(units)
    return [u for u in ("", *REWARD_UNITS) if u in present] + sorted(present - {"", *REWARD_UNITS})


def _metric_panel(metric: str, unit: str) -> str:
    return f"{metric} ({unit})" if unit else metric


def with_panels(
    data: pd.DataFrame, metrics: Sequence[str], panels: str, by: str = "method"
) -> tuple[pd.DataFrame, list[str]]:
    """``data`` with ``panel`` and the panels in order: metrics as given, a reward metric's panel split by its unit
    (``reward_mean (0/1)``, ``reward_mean (nats)``: two units never share a panel), then with ``metric and method``
    methods in palette order (``metric · <by>``, by its method or group; groups by name). ``data`` needs ``unit``
    (see with_unit) or ``method``.

    >>> d = pd.DataFrame({"metric": ["m", "n", "m"], "method": ["entropy", "gt_grpo", "gt_grpo"]})
    >>> with_panels(d, ["n", "m"], "metric and method")[1]
    ['n · gt_grpo', 'm · gt_grpo', 'm · entropy']
    >>> r = pd.DataFrame({"metric": "reward_mean", "method": ["self_certainty", "majority_voting"]})
    >>> with_panels(r, ["reward_mean"], "metric")[1]
    ['reward_mean (0/1)', 'reward_mean (nats)']
    """
    if panels not in PANELS:
        raise ValueError(f"panels={panels!r}: one of {', '.join(PANELS)}")
    if data.empty:
        return data.assign(panel=data["metric"]), []
    data = data if "unit" in data.columns else with_unit(data)
    units = data["unit"].astype(str)
    head = data["metric"].astype(str) + (" (" + units + ")").where(units != "", "")  # as _metric_panel names it
    heads = [_metric_panel(m, u) for m in metrics for u in _unit_order(list(units.unique()))]
    out = data.assign(panel=head if panels == "metric" else head + " · " + data[by].astype(str))
    present = set(out["panel"].unique())
    if panels == "metric":
        return out, [p for p in heads if p in present]
    methods = _method_order(list(out[by].dropna().astype(str).unique()))
    return out, [p for p in (f"{h} · {method}" for h in heads for method in methods) if p in present]


def panel_width(columns: int, panels: int) -> int:
    """Each panel's width: a row of ``columns`` panels (fewer when fewer are drawn) fills the page's width.

    >>> panel_width(4, 2) == panel_width(2, 2) > panel_width(4, 8)
    True
    """
    return max(140, FACET_WIDTH // max(1, min(columns, panels)) - 68)  # 68: its y axis (Y_LABELS) and the gap


def steps(values: pd.Series) -> alt.Scale:
    """The x scale every panel starts from: all of ``values``' range (the steps or hours of every run), so the panels
    line up until one is zoomed (each has its own x scale: a run that stopped early does not narrow its panel)."""
    shown = pd.to_numeric(values, errors="coerce").dropna()
    return alt.Scale(domain=[float(shown.min()), float(shown.max())]) if len(shown) else alt.Scale()


def panelled(
    data: pd.DataFrame, layers: Sequence[alt.Chart], order: Sequence[str], columns: int, y: YAxis, height: int
) -> alt.ConcatChart:
    """``layers`` drawn once per panel of ``order`` (the rows of ``data`` whose ``panel`` it is), ``columns`` a row,
    titled by the panel. Each panel has its own x and y scales and its own zoom param (``zoom_<i>``, on its first
    layer, bound to its scales), so scrolling or dragging one panel leaves the others' ranges as they are (one param
    shared by the panels of a facet sets every panel to the range zoomed in one)."""
    width = panel_width(columns, len(order))
    charts = [
        alt.LayerChart(
            layer=[layers[0].add_params(y.zoom(f"zoom_{i}")), *layers[1:]],
            transform=[alt.FilterTransform(alt.FieldEqualPredicate(field="panel", equal=name))],
            title=alt.Title(name, fontSize=13, fontWeight="normal", anchor="middle"),
            width=width,
            height=height,
        )
        for i, name in enumerate(order)
    ]  # built once each: Altair copies a chart on every method call, and a concat holds the data
    return alt.ConcatChart(
        concat=charts,
        columns=columns,
        resolve=alt.Resolve(scale=alt.ScaleResolveMap(x="independent", y="independent")),
        config=alt.Config(axisY=alt.AxisConfig(minExtent=Y_LABELS)),
        data=data,
    )


def curves_chart(
    curves: pd.DataFrame,
    events: pd.DataFrame,
    labels: pd.DataFrame,
    metrics: Sequence[str],
    x: str = "step",
    columns: int = 4,
    y: YAxis = YAxis(),
    panels: str = "metric",
) -> alt.ConcatChart:
    """One panel per metric, a reward's per unit (or per metric and method; ``columns`` a row, each its own y range):
    raw lines faint, smoothed lines over them, collapse onsets as dashed rules and diamonds; zoom and pan on x (and y
    with ``y.zoom_y``), each panel on its own, a log y axis with ``y.log``. ``curves`` needs ``smoothed`` (see
    smooth)."""
    field, title = X_FIELDS[x]
    data = curves.merge(labels, on="run_id")
    marks = onset_marks(events, curves).merge(labels, on="run_id")
    both, order = with_panels(
        pd.concat([data.assign(kind="curve"), marks.assign(kind="onset")], ignore_index=True), metrics, panels
    )
    colour = _colour(labels)
    dash = (
        alt.StrokeDash("setting:N", legend=legend("base model · dataset"))
        if labels["setting"].nunique() > 1
        else alt.value([1, 0])
    )
    base = alt.Chart().encode(x=alt.X(f"{field}:Q", title=title, scale=steps(data[field])), color=colour)
    curve, onset = alt.datum.kind == "curve", alt.datum.kind == "onset"
    tips = [
        alt.Tooltip("label:N", title="run"),
        alt.Tooltip("step:Q"),
        alt.Tooltip("wall_hours:Q", title="wall time (h)", format=".2f"),
        alt.Tooltip("value:Q", title="raw", format=".4f"),
        alt.Tooltip("smoothed:Q", format=".4f"),
    ]
    scale = y.scale()
    smoothed = alt.Y("smoothed:Q", title=None, scale=scale)
    raw = _faint_lines(base.transform_filter(curve), y, "value", 0.25, "label:N")
    line = (
        _kept(base.transform_filter(curve), y, "smoothed")
        .mark_line(strokeWidth=2, clip=True)
        .encode(y=smoothed, strokeDash=dash)
    )
    hover = (
        _kept(base.transform_filter(curve), y, "smoothed")
        .mark_circle(size=50, opacity=0.01, clip=True)
        .encode(y=smoothed, tooltip=tips)
    )
    rule = base.transform_filter(onset).mark_rule(strokeDash=[5, 3], strokeWidth=1.5)
    diamond = (
        _kept(base.transform_filter(onset), y, "smoothed")
        .mark_point(shape="diamond", size=130, filled=True, stroke="white", opacity=1, clip=True)
        .encode(y=smoothed, tooltip=["label:N", "rule:N", "step:Q", "detail:N"])
    )
    return panelled(both, [raw, line, hover, rule, diamond], order, columns, y, 230)


def _kept(chart: alt.Chart, y: YAxis, field: str) -> alt.Chart:
    """``chart`` keeping only the points a log axis can draw (> 0) when ``y.log``."""
    return chart.transform_filter(alt.datum[field] > 0) if y.log else chart


def _faint_lines(chart: alt.Chart, y: YAxis, field: str, opacity: float, detail: str) -> alt.Chart:
    """Thin, faint lines of ``field``, one per ``detail`` (raw values behind a smoothed curve, runs behind a band)."""
    return (
        _kept(chart, y, field)
        .mark_line(opacity=opacity, strokeWidth=1, clip=True)
        .encode(y=alt.Y(f"{field}:Q", title=None, scale=y.scale()), detail=detail)
    )


def coinciding(evals: pd.DataFrame, labels: pd.DataFrame) -> pd.DataFrame:
    """Runs whose evaluation curve in a panel (benchmark and metric) is the same, every step's value and interval:
    one row per such group of 2 or more, with ``facet``, ``runs`` (how many), ``drawn`` (the run whose band is
    drawn), ``run_ids`` (all of them) and ``labels`` (their labels, joined).

    >>> e = pd.DataFrame({"run_id": list("abc"), "benchmark": "B", "metric": "m", "step": 1, "value": [.5, .5, .6],
    ...                   "ci_low": .4, "ci_high": .7})
    >>> same = coinciding(e, pd.DataFrame({"run_id": list("abc"), "label": list("ABC")}))
    >>> same[["facet", "runs", "labels"]].values.tolist()
    [['B m', 2, 'A, B']]
    """
    columns = ["facet", "runs", "drawn", "run_ids", "labels"]
    if evals.empty:
        return pd.DataFrame(columns=columns)
    data = evals.merge(labels[["run_id", "label"]], on="run_id")
    data = data.assign(facet=data["benchmark"] + " " + data["metric"]).sort_values(["facet", "label", "step"])
    shape = data.round({"value": 9, "ci_low": 9, "ci_high": 9})[["facet", "label", "run_id", *CURVE]]
    curve = shape.groupby(["facet", "label", "run_id"], sort=True)[CURVE].apply(lambda r: r.to_csv(index=False))
    frame = curve.rename("curve").reset_index()
    groups = frame.groupby(["facet", "curve"], sort=False).agg(
        runs=("run_id", "size"), drawn=("run_id", "first"), run_ids=("run_id", tuple), labels=("label", ", ".join)
    )
    return groups[groups["runs"] > 1].reset_index()[columns].sort_values(["facet", "labels"], ignore_index=True)


CURVE = ["step", "value", "ci_low", "ci_high"]  # what makes two runs' evaluation curves the same


def eval_chart(evals: pd.DataFrame, labels: pd.DataFrame, columns: int = 4, y: YAxis = YAxis()) -> alt.ConcatChart:
    """Evaluation by checkpoint step: one panel per benchmark and metric, a line per run with its bootstrap interval
    as a band (drawn once, with a note "N runs coincide", where runs have the same curve); zoom and pan on x (drag,
    scroll), each panel on its own."""
    data = evals.merge(labels, on="run_id").assign(facet=lambda d: d["benchmark"] + " " + d["metric"])
    same = coinciding(evals, labels)
    hidden = {(f, r) for f, d, ids in same[["facet", "drawn", "run_ids"]].values for r in ids if r != d}
    data["band"] = [(f, r) not in hidden for f, r in zip(data["facet"], data["run_id"], strict=True)]
    notes = same.assign(kind="note", note=same["runs"].astype(str) + " runs coincide")[["facet", "kind", "note"]]
    both = pd.concat([data.assign(kind="eval"), notes], ignore_index=True)
    both["panel"] = both["facet"]
    colour = _colour(labels)
    scale = y.scale()
    base = alt.Chart().encode(x=alt.X("step:Q", title="checkpoint step", scale=steps(data["step"])), color=colour)
    is_eval = alt.datum.kind == "eval"
    band = (
        _kept(base.transform_filter(is_eval & alt.datum.band), y, "ci_low")
        .mark_area(opacity=0.2, clip=True)
        .encode(y=alt.Y("ci_low:Q", title=None, scale=scale), y2="ci_high:Q", detail="label:N")
    )
    line = (
        _kept(base.transform_filter(is_eval), y, "value")
        .mark_line(point=True, strokeWidth=2, clip=True)
        .encode(
            y=alt.Y("value:Q", title=None, scale=scale),
            tooltip=["label:N", "step:Q", alt.Tooltip("value:Q", format=".4f"), "ci_low:Q", "ci_high:Q"],
        )
    )
    note = (
        alt.Chart()
        .transform_filter(alt.datum.kind == "note")
        .mark_text(align="left", baseline="top", fontSize=12, fontWeight="bold", dx=4, dy=4)
        .encode(x=alt.value(0), y=alt.value(0), text="note:N", color=alt.value("#888888"))
    )
    return panelled(both, [band, line, note], sorted(data["facet"].unique()), columns, y, 200)


GROUPS = {"method": "method", "base model": "base_model", "dataset": "dataset"}


BANDS = ("min-max", "mean ± std")


def group_bands(
    curves: pd.DataFrame, runs: pd.DataFrame, by: str, y: str = "smoothed", band: str = "min-max"
) -> pd.DataFrame:
    """Per group (the runs' ``by`` column), metric and step: the mean of ``y`` over the group's runs and its band,
    min to max or the mean ± the sample standard deviation (the spread across seeds when a cell has several runs;
    0 for a single run); a reward metric's runs apart per unit (see with_unit: a group of methods rewarding in nats
    and in 0/1 gets a band of each). Columns: group, unit, metric, step, mean, low, high, runs.

    >>> c = pd.DataFrame({"run_id": ["a", "b", "c"], "metric": "m", "step": 1, "smoothed": [1.0, 2.0, 6.0]})
    >>> r = pd.DataFrame({"run_id": ["a", "b", "c"], "method": "x"})
    >>> group_bands(c, r, "method")[["mean", "low", "high"]].values.tolist()
    [[3.0, 1.0, 6.0]]
    >>> group_bands(c, r, "method", band="mean ± std")[["mean", "low", "high"]].round(3).values.tolist()
    [[3.0, 0.354, 5.646]]
    """
    if band not in BANDS:
        raise ValueError(f"band={band!r}: one of {', '.join(BANDS)}")
    data = _grouped(curves, runs, by)
    stats = data.groupby(["group", "unit", "metric", "step"], sort=True)[y].agg(["mean", "min", "max", "std", "count"])
    if band == "mean ± std":
        spread = stats["std"].fillna(0.0)
        stats["min"], stats["max"] = stats["mean"] - spread, stats["mean"] + spread
    stats = stats.drop(columns="std")
    return stats.rename(columns={"min": "low", "max": "high", "count": "runs"}).reset_index()


def _grouped(curves: pd.DataFrame, runs: pd.DataFrame, by: str) -> pd.DataFrame:
    """``curves`` with ``group`` (each run's ``by``) and ``unit`` (see with_unit)."""
    columns = list(dict.fromkeys(["method", by]))
    merged = with_unit(curves.merge(runs[["run_id", *columns]], on="run_id"))
    return merged.assign(group=merged[by]).drop(columns=columns)


def grouped_chart(
    bands: pd.DataFrame,
    curves: pd.DataFrame,
    runs: pd.DataFrame,
    by: str,
    metrics: Sequence[str],
    columns: int = 4,
    y: YAxis = YAxis(),
    panels: str = "metric",
) -> alt.ConcatChart:
    """One panel per metric, a reward's per unit (or per metric and group): each group's mean line over its min-max
    band, the single runs faint behind; a legend of the groups only (readable however many runs), zoom and pan on x
    (and y), each panel on its own. ``bands`` from group_bands."""
    groups = list(dict.fromkeys(bands["group"]))
    coloured = by == "method"
    scale = alt.Scale(domain=groups, range=[method_colour(g) for g in groups]) if coloured else alt.Scale()
    colour = alt.Color("group:N", title=by, scale=scale, legend=legend(by))
    faint = _grouped(curves, runs, by)
    both, order = with_panels(
        pd.concat([bands.assign(kind="band"), faint.assign(kind="run")], ignore_index=True), metrics, panels, "group"
    )
    base = alt.Chart().encode(x=alt.X("step:Q", title="step", scale=steps(both["step"])), color=colour)
    is_band, is_run = alt.datum.kind == "band", alt.datum.kind == "run"
    yscale = y.scale()
    single = _faint_lines(base.transform_filter(is_run), y, "smoothed", 0.12, "run_id:N")
    area = (
        _kept(base.transform_filter(is_band), y, "low")
        .mark_area(opacity=0.25, clip=True)
        .encode(y=alt.Y("low:Q", title=None, scale=yscale), y2="high:Q")
    )
    mean = (
        _kept(base.transform_filter(is_band), y, "mean")
        .mark_line(strokeWidth=2.5, clip=True)
        .encode(
            y=alt.Y("mean:Q", title=None, scale=yscale),
            tooltip=["group:N", "step:Q", alt.Tooltip("mean:Q", format=".4f"), "low:Q", "high:Q", "runs:Q"],
        )
    )
    return panelled(both, [single, area, mean], order, columns, y, 230)
