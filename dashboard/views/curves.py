"""Training curves: runs chosen by method / base model / dataset compared side by side, one panel per metric (a
reward's panel per unit), EMA-smoothed over the faint raw curves, coloured by method, collapse onsets marked and
listed; each panel zooms on its own."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pandas as pd
import streamlit as st

from corewarding.results.collapse import CollapseRules, collapse_events
from corewarding.settings_diff import spread
from dashboard.chart_controls import export_buttons, y_axis_choices
from dashboard.common import METHOD_COLOURS, plain, query, require_store, stored_runs, table
from dashboard.curves_chart import (
    BANDS,
    GROUPS,
    PANELS,
    X_FIELDS,
    YAxis,
    coinciding,
    curves_chart,
    eval_chart,
    group_bands,
    grouped_chart,
    run_labels,
    smooth,
)

DEFAULT_METRICS = ["val_accuracy", "reward_mean", "label_accuracy", "response_length_mean"]


def rules_from_sidebar() -> CollapseRules:
    st.sidebar.subheader("Collapse detection")
    return CollapseRules(
        margin=st.sidebar.slider("Fall from peak (margin)", 0.01, 0.5, 0.10, 0.01, key="margin", bind="query-params"),
        reward_high=st.sidebar.slider(
            "Reward counted as near 1", 0.5, 1.0, 0.95, 0.01, key="reward_high", bind="query-params"
        ),
        cap_fraction=st.sidebar.slider(
            "Length at cap: fraction of the cap", 0.5, 1.0, 0.95, 0.01, key="cap", bind="query-params"
        ),
        min_steps=st.sidebar.number_input(
            "Length at cap for at least (steps)", 1, 100, 3, key="min_steps", bind="query-params"
        ),
        window=st.sidebar.number_input(
            "Collapse detection window (steps)", 1, 50, 5, key="window", bind="query-params"
        ),
    )


def events_for(run_ids: list[str] | None, rules: CollapseRules) -> pd.DataFrame:
    return collapse_events(query("collapse_inputs", run_ids), rules)


def choose_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs matching the method / base model / dataset picks (default: every method of the first setting)."""
    first = runs.sort_values(["base_model", "dataset"]).iloc[0]
    present = set(runs["method"])
    methods = [m for m in METHOD_COLOURS if m in present] + sorted(present - set(METHOD_COLOURS))
    a, b, c = st.columns(3)
    picked_methods = a.multiselect("Method", methods, default=methods, key="methods", bind="query-params")
    models = sorted(runs["base_model"].unique())
    picked_models = b.multiselect(
        "Base model", models, default=[first["base_model"]], key="base_models", bind="query-params"
    )
    datasets = sorted(runs["dataset"].unique())
    picked_sets = c.multiselect("Dataset", datasets, default=[first["dataset"]], key="datasets", bind="query-params")
    chosen = runs[
        runs["method"].isin(picked_methods) & runs["base_model"].isin(picked_models) & runs["dataset"].isin(picked_sets)
    ]
    if st.toggle("Newest run of each cell only", value=True, key="newest", bind="query-params"):
        chosen = chosen.sort_values("started_at", ascending=False, na_position="last").drop_duplicates("cell_id")
    return chosen


def refresh_from_sidebar() -> float | None:
    """Seconds between live refreshes of the charts (None: off), chosen in the sidebar and kept in the URL."""
    st.sidebar.subheader("Live refresh")
    live = st.sidebar.toggle(
        "Re-query the store while runs are going", value=False, key="live", bind="query-params",
        help="the charts and the collapse list are drawn again from the store every few seconds; the page's "
        "choices stay as they are",
    )  # fmt: skip
    every = st.sidebar.number_input("Every (seconds)", 2, 3600, 30, key="every", bind="query-params", disabled=not live)
    return float(every) if live else None


def refreshed(every: float | None) -> None:
    """When the store was last read, and how often it is read again."""
    now = datetime.now(UTC).strftime("%H:%M:%S")
    st.caption(f"Read from the store at {now} UTC" + (f"; again every {every:g} s." if every else "."))


def evaluation_view(chosen: pd.DataFrame, y: YAxis, every: float | None) -> None:
    """The chosen runs' evaluation metrics against the checkpoint step, with their intervals."""
    checker = st.radio("Checker", ["math_verify", "strict"], horizontal=True, key="checker", bind="query-params")
    evals = query("eval_curves", list(chosen["run_id"]), checker)
    if evals.empty:
        st.info(f"No checkpoint of the chosen runs is evaluated under {checker}.")
        return
    warning = settings_warning(evals)
    if warning:
        st.warning(warning)
    labels = run_labels(chosen)
    for group in coinciding(evals, labels).to_dict("records"):
        st.caption(
            f"{plain(group['facet'])}: {group['runs']} runs coincide (the same score and interval at every step; "
            f"one band drawn): {plain(group['labels'])}."
        )
    chart = eval_chart(evals, labels, y=y)
    st.altair_chart(chart, width="stretch")
    export_buttons(chart, "evaluation-curves")
    refreshed(every)


def settings_warning(evals: pd.DataFrame) -> str | None:
    """A warning naming each benchmark a metric of which was scored under differing settings, and what differs."""
    crossed = []
    for benchmark, rows in evals.groupby("benchmark", sort=True):
        keys = rows.drop_duplicates(["metric", "settings_key"])
        if keys.duplicated("metric").any():  # a metric of this benchmark scored under two settings
            distinct = rows.drop_duplicates("settings_key")
            crossed.append(f"{benchmark} ({', '.join(spread(list(distinct['settings'])))})")
    if not crossed:
        return None
    return "⚠ settings differ between the scores shown, which are not comparable as they stand: " + "; ".join(crossed)


def training_view(chosen: pd.DataFrame, rules: CollapseRules, choices: dict[str, Any], every: float | None) -> None:
    """The chosen runs' training curves (one chart, a panel per metric), then their collapses."""
    run_ids = list(chosen["run_id"])
    metrics, y, columns, panels = choices["metrics"], choices["y"], choices["columns"], choices["panels"]
    curves = smooth(query("training_curves", run_ids, metrics), choices["weight"])
    events = events_for(run_ids, rules)
    if choices["group"] != "none":
        field = GROUPS[choices["group"]]
        bands = group_bands(curves, chosen, field, band=choices["band"])
        st.caption(
            f"{len(chosen)} runs in {bands['group'].nunique()} groups by {choices['group']}; drag or scroll a panel "
            "to zoom it."
        )
        chart = grouped_chart(bands, curves, chosen, field, metrics, columns, y, panels)
    else:
        if choices["x_axis"] == "wall time" and curves["wall_hours"].isna().any():
            st.caption("Runs that log no step_seconds have no wall time and are left out of this view.")
        chart = curves_chart(curves, events, run_labels(chosen), metrics, choices["x_axis"], columns, y, panels)
    st.altair_chart(chart, width="stretch")
    export_buttons(chart, "training-curves")
    refreshed(every)
    st.subheader("Collapses")
    st.caption(
        "Dashed rules and diamonds on the charts: val_drop (validation accuracy fell more than the margin below its "
        "peak), reward_without_labels (a [0, 1] reward near 1 while pseudo-label accuracy fell), "
        "reward_rise_without_labels (an unbounded reward rose while it fell), length_at_cap (mean response length "
        "pinned at the cap)."
    )
    scope = st.radio(
        "List collapses of", ["the chosen runs", "all runs"], horizontal=True, key="scope", bind="query-params"
    )
    listed = events if scope == "the chosen runs" else events_for(None, rules)
    table(listed, "collapses")


require_store()
st.title("Training curves")
every = refresh_from_sidebar()
runs = stored_runs()
chosen = choose_runs(runs)
source = st.radio(
    "Curves of",
    ["training metrics", "evaluation by checkpoint"],
    horizontal=True,
    key="source",
    bind="query-params",
    help="evaluation by checkpoint: each benchmark's score at every saved step, with its bootstrap interval",
)
y = y_axis_choices()
if source == "evaluation by checkpoint":
    st.fragment(evaluation_view, run_every=every)(chosen, y, every)
    st.stop()
names = query("training_metric_names")
metrics = st.multiselect(
    "Metrics",
    names,
    default=[m for m in DEFAULT_METRICS if m in names] or names[:1],
    key="metrics",
    bind="query-params",
)
left, middle, right, far, band_column, panel_column = st.columns([2, 1, 1, 1, 1, 1])
weight = left.slider(
    "Smoothing (EMA weight; the raw curve stays faint behind)", 0.0, 0.99, 0.6, 0.01, key="ema", bind="query-params"
)
x_axis = middle.radio("x axis", list(X_FIELDS), horizontal=True, key="x_axis", bind="query-params")
columns = int(
    right.number_input("Charts per row", 1, 6, min(4, max(1, len(metrics))), key="columns", bind="query-params")
)
group = far.selectbox(
    "Group runs by",
    ["none", *GROUPS],
    key="group",
    bind="query-params",
    help="one mean line per group over its band, the single runs faint",
)
band = band_column.selectbox(
    "Band",
    list(BANDS),
    key="band",
    bind="query-params",
    help="min-max over the group's runs, or mean ± standard deviation (the spread across seeds of a cell)",
    disabled=group == "none",
)
panels = panel_column.selectbox(
    "A panel per",
    list(PANELS),
    key="panels",
    bind="query-params",
    help="every panel has its own y range, and a reward gets a panel per unit (Self-Certainty's nats, Entropy's "
    "-nats, the others' 0/1); metric and method: each method's curves in panels of their own",
)
rules = rules_from_sidebar()
if chosen.empty or not metrics:
    st.info("Pick at least one method, base model, dataset and metric with runs in the store.")
    st.stop()
choices = dict(
    metrics=metrics, y=y, columns=columns, panels=panels, weight=weight, group=group, band=band, x_axis=x_axis
)
st.fragment(training_view, run_every=every)(chosen, rules, choices, every)
