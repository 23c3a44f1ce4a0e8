"""The run table: every ingested run, filtered by method, base model, data set, status and matrix, optionally
grouped; each row opens its run page, and two picked rows open the comparison."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from corewarding.matrix import load_matrix, matrix_names
from dashboard.common import plain, require_store, stored_runs, table

FILTERS = {"method": "Method", "base_model": "Base model", "dataset": "Dataset", "status": "Status"}
GROUP_BY = {"none": None, "method": "method", "base model": "base_model", "dataset": "dataset", "status": "status"}


@st.cache_data(show_spinner=False)
def matrix_members() -> dict[str, frozenset[str]]:
    """Each matrix's cell ids."""
    return {name: frozenset(c.cell_id for c in load_matrix(name).cells) for name in matrix_names()}


def filtered(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs matching the picks of every filter (an empty pick: no filter)."""
    columns = st.columns(len(FILTERS) + 1)
    keep = pd.Series(True, index=runs.index)
    for column, (field, label) in zip(columns, FILTERS.items(), strict=False):
        picked = column.multiselect(
            label, sorted(runs[field].dropna().unique()), placeholder="all", key=field, bind="query-params"
        )
        if picked:
            keep &= runs[field].isin(picked)
    matrices = columns[-1].multiselect("Matrix", matrix_names(), placeholder="any", key="matrix", bind="query-params")
    if matrices:
        members = frozenset().union(*(matrix_members()[m] for m in matrices))
        keep &= runs["cell_id"].isin(members)
    return runs[keep]


require_store()
st.title("Runs")
runs = stored_runs()
shown = filtered(runs)
group = st.radio("Group by", list(GROUP_BY), horizontal=True, key="group", bind="query-params")
st.caption(f"{len(shown)} of {len(runs)} runs. Open a run with its link; tick two rows to compare them.")
if GROUP_BY[group]:
    field = GROUP_BY[group]
    summary = shown.groupby(field).agg(
        runs=("run_id", "count"),
        finished=("status", lambda s: int((s == "finished").sum())),
        mean_last_step=("last_step", "mean"),
    )
    table(summary.reset_index(), f"runs-by-{field}")
rows = shown.assign(open="run?run=" + shown["run_id"])
columns = ["open", "run_id", "method", "base_model", "dataset", "status", "last_step", "total_steps", "started_at"]
picked = st.dataframe(
    rows[columns],
    hide_index=True,
    on_select="rerun",
    selection_mode="multi-row",
    key="run_table",
    column_config={"open": st.column_config.LinkColumn("run page", display_text="open")},
)
chosen = [rows["run_id"].iloc[i] for i in picked.selection.rows]  # type: ignore[attr-defined]
if len(chosen) == 2:
    st.page_link(
        "views/compare.py",
        label=f"Compare {plain(chosen[0])} and {plain(chosen[1])}",
        query_params={"a": chosen[0], "b": chosen[1]},
    )
elif chosen:
    st.caption("Tick exactly two rows to compare them.")
