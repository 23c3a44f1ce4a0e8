"""Matrix: every cell as a grid (rows model x dataset, columns method), coloured by status or a chosen metric; a cell's
seeds share its tile (seed 0's run), which counts them."""

from __future__ import annotations

from typing import Any

import altair as alt
import pandas as pd
import streamlit as st

from corewarding.matrix import Cell, hub_repo_id, load_matrix
from corewarding.results.ingest.attempts import failure_note
from dashboard.common import plain, query, require_store, table, visible_frame
from dashboard.released_table import hub_note

STATUS_COLOURS = {
    "finished": "#2e7d32",
    "running": "#1565c0",
    "incomplete": "#ef6c00",
    "interrupted": "#f9a825",
    "failed": "#c62828",
    "unknown": "#6d4c41",
    "not run": "#cfd8dc",
}
LIGHT_STATUSES = {"not run"}  # fills light enough for black text; white on the others


def text_colour(grid: pd.DataFrame, metric: str | None) -> pd.Series:
    """Black on light cells, white on dark ones: by status, or for a metric by where the value sits in viridis
    (dark below the middle of the values shown)."""
    if metric is None:
        return grid["status"].map(lambda s: "black" if s in LIGHT_STATUSES else "white")
    values = pd.to_numeric(grid["value"], errors="coerce")
    middle = (values.min() + values.max()) / 2 if values.notna().any() else 0.0
    return values.map(lambda v: "black" if pd.isna(v) or v >= middle else "white")


def hub_columns(grid: pd.DataFrame) -> pd.DataFrame:
    """``hub_url`` only where the run's publish record shows a push; ``hub`` says which step, or why not (see
    hub_note: a tiny or demo cell is not meant for the Hub)."""
    pushed = grid["published_commit"].notna()
    grid["hub_url"] = ("https://huggingface.co/" + grid["hub_repo_id"].fillna("")).where(pushed)
    grid["hub"] = [
        f"published, step {s:.0f} ({c[:7]})" if isinstance(c, str) else hub_note(cell, repo)
        for s, c, cell, repo in zip(
            grid["published_step"], grid["published_commit"], grid["cell_id"], grid["hub_repo_id"], strict=True
        )
    ]
    return grid


MATRICES = ("paper_v3", "paper")  # the paper's v3 (72 released checkpoints, with Co-rewarding-III) and v2 (66)
STORE = "runs in the store"


@st.cache_data(show_spinner=False)
def matrix_cells(name: str) -> pd.DataFrame:
    """A matrix's cells with their Hub repo ids (from corewarding.matrix, the only place names are made)."""
    cells = load_matrix(name).cells
    return pd.DataFrame([{**c.to_dict(), "cell_id": c.cell_id, "hub_repo_id": hub_repo_id(c)} for c in cells])


def store_cells(runs: pd.DataFrame) -> pd.DataFrame:
    """The store's cells, one per cell group (seed 0's Hub repo)."""
    frame = runs[runs["cell_id"] == runs["cell_group"]][["method", "base_model", "dataset", "hub_repo_id"]]
    frame = frame.drop_duplicates().copy()
    frame["cell_id"] = [Cell(m, b, d).cell_id for m, b, d in frame[["method", "base_model", "dataset"]].values]
    return frame.sort_values(["dataset", "base_model", "method"])


def mark_failed(grid: pd.DataFrame, failures: pd.DataFrame) -> pd.DataFrame:
    """Cells whose newest attempt failed are ``failed`` for the config it ran, with no figures of their own: the run
    the store holds for them (from an earlier config, or this one's before the failure) is not their result."""
    failed = grid["cell_id"].isin(failures["cell_id"])
    grid.loc[failed, "status"] = "failed"
    grid.loc[failed, "progress"] = ""
    if "value" in grid:
        grid.loc[failed, ["value", "value_step"]] = None
    return grid


def with_metric(grid: pd.DataFrame) -> tuple[pd.DataFrame, str | None]:
    """Add ``value`` (and its step) for the metric chosen in the sidebar; returns the metric's title."""
    colour_by = st.sidebar.radio(
        "Colour by", ["status", "training metric", "evaluation metric"], key="colour_by", bind="query-params"
    )
    if colour_by == "training metric":
        names = query("training_metric_names")
        if not names:
            st.sidebar.warning("No training metrics ingested yet.")
            return grid.assign(value=None, value_step=None), None
        metric = st.sidebar.selectbox(
            "Metric",
            names,
            index=names.index("val_accuracy") if "val_accuracy" in names else 0,
            key="training_metric",
            bind="query-params",
        )
        how = st.sidebar.radio("Value", ["last", "peak"], horizontal=True, key="how", bind="query-params")
        values = query("training_metric_by_run", metric).rename(columns={how: "value", "step": "value_step"})
        return grid.merge(values[["run_id", "value", "value_step"]], on="run_id", how="left"), f"{metric} ({how})"
    if colour_by == "evaluation metric":
        choices = query("eval_choices")
        if choices.empty:
            st.sidebar.warning("No evaluation results ingested yet.")
            return grid.assign(value=None, value_step=None), None
        benchmark = st.sidebar.selectbox(
            "Benchmark", sorted(choices["benchmark"].unique()), key="benchmark", bind="query-params"
        )
        checker = st.sidebar.selectbox(
            "Checker", sorted(choices["checker"].unique()), key="checker", bind="query-params"
        )
        metrics = sorted(choices[(choices["benchmark"] == benchmark) & (choices["checker"] == checker)]["metric"])
        metric = st.sidebar.selectbox("Metric", metrics, key="eval_metric", bind="query-params")
        values = query("eval_metric_by_run", benchmark, checker, metric).rename(columns={"step": "value_step"})
        return grid.merge(values, on="run_id", how="left"), f"{benchmark} {metric} ({checker}, latest step)"
    return grid, None


HEADER_ANGLE = -30  # the method headers slant up and to the right: none overlaps its neighbour however long
CELL_STEP = 100  # px per column: the headers and every cell's text fit, the legend below fits a 1400 px window


def chart(grid: pd.DataFrame, metric: str | None) -> alt.LayerChart:
    methods = list(dict.fromkeys(grid["method"]))
    rows = list(dict.fromkeys(grid["row"]))
    base = alt.Chart(grid).encode(
        # every header shown: no overlap culling, no truncation, slanted so long names never collide
        x=alt.X(
            "method:N",
            sort=methods,
            title=None,
            axis=alt.Axis(
                orient="top",
                labelAngle=HEADER_ANGLE,
                labelAlign="left",
                labelBaseline="middle",
                labelOverlap=False,
                labelLimit=0,
                labelFontSize=12,
                labelPadding=6,
            ),
        ),
        y=alt.Y("row:N", sort=rows, title=None, axis=alt.Axis(labelLimit=320)),
    )
    if metric is None:
        colour = alt.Color(
            "status:N",
            scale=alt.Scale(domain=list(STATUS_COLOURS), range=list(STATUS_COLOURS.values())),
            legend=alt.Legend(orient="bottom", direction="horizontal", columns=4, labelLimit=0, symbolSize=200),
        )
    else:
        colour = alt.Color(
            "value:Q",
            title=metric,
            scale=alt.Scale(scheme="viridis"),
            legend=alt.Legend(orient="bottom", direction="horizontal", titleLimit=0, gradientLength=300),
        )
    tooltip: list[Any] = [
        alt.Tooltip("cell_id:N", title="cell"),
        alt.Tooltip("seeds:Q", title="seeds stored"),
        "status:N",
        alt.Tooltip("progress:N", title="steps"),
        alt.Tooltip("hub:N", title="Hub"),
    ]
    if metric is not None:
        tooltip += [alt.Tooltip("value:Q", format=".4f", title=metric), alt.Tooltip("value_step:Q", title="step")]
    # a click on a cell or its label opens its run page (a cell never run has no link)
    rect = base.mark_rect(stroke="white", strokeWidth=2).encode(color=colour, href="run_url:N", tooltip=tooltip)
    text = base.mark_text(fontSize=11).encode(
        text="label:N",
        color=alt.Color("text_colour:N", scale=None, legend=None),
        href="run_url:N",
        tooltip=tooltip,
    )
    # a column CELL_STEP px wide, so the cell texts fit however narrow the window (the page scrolls sideways then)
    return (
        (rect + text)
        .resolve_scale(color="independent")
        # pad: the rows keep their 34 px, the headers and the legend below are added around them (Streamlit's
        # default, fit, squeezed the rows into the height, legend included, and hid every other row label)
        .properties(
            width=alt.Step(CELL_STEP),
            height=max(220, 34 * len(rows)),
            autosize=alt.AutoSizeParams(type="pad", contains="padding"),
        )
    )


require_store()
st.title("Matrix")
runs = query("latest_runs")
in_paper = runs["cell_id"].isin(matrix_cells(MATRICES[0])["cell_id"]).any() if len(runs) else False
choices = [f"{name} matrix" for name in MATRICES] + [STORE]
source = st.radio(
    "Cells",
    choices,
    index=0 if in_paper or runs.empty else len(choices) - 1,
    horizontal=True,
    help="paper_v3: the 72 released checkpoints (v2's 66 and Co-rewarding-III's 6); paper: v2's 66",
    key="cells",
    bind="query-params",
)
cells = store_cells(runs) if source == STORE else matrix_cells(source.removesuffix(" matrix"))
stored = runs[["cell_id", "run_id", "status", "last_step", "total_steps", "published_step", "published_commit"]]
grid = hub_columns(cells.merge(stored, on="cell_id", how="left"))
grid["status"] = grid["status"].fillna("not run")
grid["seeds"] = grid["cell_id"].map(runs["cell_group"].value_counts()).fillna(0).astype(int)
grid["run_url"] = ("run?cell=" + grid["cell_id"]).where(grid["run_id"].notna())
grid["row"] = grid["base_model"] + " · " + grid["dataset"]
grid["progress"] = [
    f"{s:.0f}/{t:.0f}" if pd.notna(s) and pd.notna(t) else ""
    for s, t in zip(grid["last_step"], grid["total_steps"], strict=True)
]
failures = query("failed_cells")
grid, metric = with_metric(grid)
grid = mark_failed(grid, failures)
grid["label"] = grid["status"] if metric is None else grid["value"].map(lambda v: "" if pd.isna(v) else f"{v:.3f}")
grid["text_colour"] = text_colour(grid, metric)
counts = grid["status"].value_counts()
statuses = ", ".join(f"{n} {plain(s)}" for s, n in counts.items())  # a status is run.json's text
st.caption(f"{len(grid)} cells: {statuses}; {grid['hub_url'].notna().sum()} published (click one for its Hub repo).")
for failure in failures[failures["cell_id"].isin(grid["cell_id"])].to_dict("records"):
    st.error(f"{plain(failure['cell_id'])}: {plain(failure_note(failure))}")
if grid.empty:
    st.info("No runs in the store yet.")
else:
    shown = visible_frame(grid.drop(columns=["run_url", "hub_url"])).assign(run_url=grid["run_url"])  # links as made
    st.altair_chart(chart(shown, metric), width="content")
columns = ["cell_id", "seeds", "status", "progress", "run_id", "hub", "hub_url"] + (
    ["value", "value_step"] if metric else []
)
table(
    grid[columns],
    "matrix",
    column_config={
        "hub_url": st.column_config.LinkColumn("Hub repo", display_text=r"https://huggingface\.co/(.*)"),
    },
)
