"""Matrix: every cell as a grid (rows model x dataset, columns method), coloured by status or a chosen metric."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from corewarding.matrix import Cell, hub_repo_id, load_matrix
from dashboard.common import query, require_store, table

STATUS_COLOURS = {
    "finished": "#2e7d32",
    "running": "#1565c0",
    "incomplete": "#ef6c00",
    "interrupted": "#f9a825",
    "failed": "#c62828",
    "unknown": "#6d4c41",
    "not run": "#cfd8dc",
}


@st.cache_data(show_spinner=False)
def paper_cells() -> pd.DataFrame:
    """The paper matrix's cells with their Hub repo ids (from corewarding.matrix, the only place names are made)."""
    cells = load_matrix("paper").cells
    return pd.DataFrame([{**c.to_dict(), "cell_id": c.cell_id, "hub_repo_id": hub_repo_id(c)} for c in cells])


def store_cells(runs: pd.DataFrame) -> pd.DataFrame:
    frame = runs[["method", "base_model", "dataset", "hub_repo_id"]].drop_duplicates().copy()
    frame["cell_id"] = [Cell(m, b, d).cell_id for m, b, d in frame[["method", "base_model", "dataset"]].values]
    return frame.sort_values(["dataset", "base_model", "method"])


def with_metric(grid: pd.DataFrame) -> tuple[pd.DataFrame, str | None]:
    """Add ``value`` (and its step) for the metric chosen in the sidebar; returns the metric's title."""
    colour_by = st.sidebar.radio("Colour by", ["status", "training metric", "evaluation metric"])
    if colour_by == "training metric":
        names = query("training_metric_names")
        if not names:
            st.sidebar.warning("No training metrics ingested yet.")
            return grid.assign(value=None, value_step=None), None
        metric = st.sidebar.selectbox(
            "Metric", names, index=names.index("val_accuracy") if "val_accuracy" in names else 0
        )
        how = st.sidebar.radio("Value", ["last", "peak"], horizontal=True)
        values = query("training_metric_by_run", metric).rename(columns={how: "value", "step": "value_step"})
        return grid.merge(values[["run_id", "value", "value_step"]], on="run_id", how="left"), f"{metric} ({how})"
    if colour_by == "evaluation metric":
        choices = query("eval_choices")
        if choices.empty:
            st.sidebar.warning("No evaluation results ingested yet.")
            return grid.assign(value=None, value_step=None), None
        benchmark = st.sidebar.selectbox("Benchmark", sorted(choices["benchmark"].unique()))
        checker = st.sidebar.selectbox("Checker", sorted(choices["checker"].unique()))
        metrics = sorted(choices[(choices["benchmark"] == benchmark) & (choices["checker"] == checker)]["metric"])
        metric = st.sidebar.selectbox("Metric", metrics)
        values = query("eval_metric_by_run", benchmark, checker, metric).rename(columns={"step": "value_step"})
        return grid.merge(values, on="run_id", how="left"), f"{benchmark} {metric} ({checker}, latest step)"
    return grid, None


def chart(grid: pd.DataFrame, metric: str | None) -> alt.LayerChart:
    methods = list(dict.fromkeys(grid["method"]))
    rows = list(dict.fromkeys(grid["row"]))
    base = alt.Chart(grid).encode(
        x=alt.X("method:N", sort=methods, title=None, axis=alt.Axis(orient="top", labelAngle=0)),
        y=alt.Y("row:N", sort=rows, title=None, axis=alt.Axis(labelLimit=320)),
    )
    if metric is None:
        colour = alt.Color(
            "status:N", scale=alt.Scale(domain=list(STATUS_COLOURS), range=list(STATUS_COLOURS.values()))
        )
    else:
        colour = alt.Color("value:Q", title=metric, scale=alt.Scale(scheme="viridis"))
    tooltip = ["cell_id:N", "status:N", "run_id:N", "progress:N", "hub_repo_id:N"]
    if metric is not None:
        tooltip += [alt.Tooltip("value:Q", format=".4f", title=metric), alt.Tooltip("value_step:Q", title="step")]
    rect = base.mark_rect(stroke="white", strokeWidth=2).encode(color=colour, href="hub_url:N", tooltip=tooltip)
    text = base.mark_text(fontSize=11, color="black").encode(text="label:N")
    return (rect + text).properties(height=max(220, 34 * len(rows)))


require_store()
st.title("Matrix")
runs = query("latest_runs")
in_paper = runs["cell_id"].isin(paper_cells()["cell_id"]).any() if len(runs) else False
source = st.radio(
    "Cells", ["paper matrix", "runs in the store"], index=0 if in_paper or runs.empty else 1, horizontal=True
)
cells = paper_cells() if source == "paper matrix" else store_cells(runs)
grid = cells.merge(runs[["cell_id", "run_id", "status", "last_step", "total_steps"]], on="cell_id", how="left")
grid["status"] = grid["status"].fillna("not run")
grid["row"] = grid["base_model"] + " · " + grid["dataset"]
grid["hub_url"] = "https://huggingface.co/" + grid["hub_repo_id"].fillna("")
grid["progress"] = [
    f"{s:.0f}/{t:.0f}" if pd.notna(s) and pd.notna(t) else ""
    for s, t in zip(grid["last_step"], grid["total_steps"], strict=True)
]
grid, metric = with_metric(grid)
grid["label"] = grid["status"] if metric is None else grid["value"].map(lambda v: "" if pd.isna(v) else f"{v:.3f}")
counts = grid["status"].value_counts()
st.caption(
    f"{len(grid)} cells: " + ", ".join(f"{n} {s}" for s, n in counts.items()) + ". Click a cell for its Hub repo."
)
if grid.empty:
    st.info("No runs in the store yet.")
else:
    st.altair_chart(chart(grid, metric), width="stretch")
columns = ["cell_id", "status", "progress", "run_id", "hub_url"] + (["value", "value_step"] if metric else [])
table(
    grid[columns],
    "matrix",
    column_config={
        "hub_url": st.column_config.LinkColumn("Hub repo", display_text=r"https://huggingface\.co/(.*)"),
    },
)
