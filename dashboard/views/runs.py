"""The run table: every ingested run with its seed, last validation accuracy, last mean reward (and its unit), collapse
flag and training hours; searched by text, filtered by method, base model, data set, status and matrix, optionally
grouped (rounded summaries; "cell (seeds)" gives one row per cell, its seeds summarised); each row opens its run page,
and two or more picked rows open their comparison."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import pandas as pd
import streamlit as st

from corewarding.matrix import load_matrix, matrix_names
from corewarding.methods import reward_unit
from dashboard.common import UNITS_HELP, plain, query, require_store, stored_runs, table, visible, visible_frame

FILTERS = {"method": "Method", "base_model": "Base model", "dataset": "Dataset", "status": "Status"}
GROUP_BY = {
    "none": None, "method": "method", "base model": "base_model", "dataset": "dataset", "status": "status",
    "cell (seeds)": "cell_group",
}  # fmt: skip
SEARCHED = ["run_id", "cell_id", "cell_group", "method", "base_model", "dataset"]
COLUMNS = [
    "open", "run_id", "seed_index", "status", "last_val_acc", "last_reward", "reward_unit", "collapse", "wall_hours",
    "last_step", "total_steps", "method", "base_model", "dataset", "started_at",
]  # fmt: skip
NUMBER = {
    "seed_index": st.column_config.NumberColumn("seed", format="%d", help="the cell's training seed (0: its first)"),
    "last_val_acc": st.column_config.NumberColumn("last val acc", format="%.3f", help="validation accuracy, last step"),
    "last_reward": st.column_config.NumberColumn("last reward", format="%.3f", help="mean reward, last training step"),
    "reward_unit": st.column_config.TextColumn("reward unit", help=UNITS_HELP),
    "collapse": st.column_config.TextColumn("collapse", help="rules fired (default thresholds), earliest onset first"),
    "wall_hours": st.column_config.NumberColumn("train hours", format="%.2f", help="sum of step_seconds (wall time)"),
    "gpu_hours": st.column_config.NumberColumn("GPU-hours", format="%.2f", help="run.json's GPU-hour ledger"),
}


@st.cache_data(show_spinner=False)
def matrix_members() -> dict[str, frozenset[str]]:
    """Each matrix's cell ids."""
    return {name: frozenset(c.cell_id for c in load_matrix(name).cells) for name in matrix_names()}


def with_metrics(runs: pd.DataFrame) -> pd.DataFrame:
    """``runs`` with last_val_acc, last_reward, reward_unit, collapse ("" for none), collapse_step, wall_hours and
    gpu_hours (NULL where run.json keeps no GPU-hour ledger)."""
    out = runs.merge(query("run_metrics"), on="run_id", how="left").merge(
        query("collapse_flags"), on="run_id", how="left"
    )
    out["collapse"] = out["collapse"].fillna("")
    out["reward_unit"] = out["method"].map(reward_unit)
    return out.merge(query("gpu_hours"), on="run_id", how="left")


def searched(runs: pd.DataFrame, text: str) -> pd.Series:
    """Rows whose run id, cell, method, base model or data set contain every word of ``text`` (any case)."""
    haystack = runs[SEARCHED].fillna("").astype(str).agg(" ".join, axis=1).str.lower()
    keep = pd.Series(True, index=runs.index)
    for word in text.lower().split():
        keep &= haystack.str.contains(word, regex=False)
    return keep


def filtered(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs matching the search and the picks of every filter (an empty pick: no filter)."""
    text = st.text_input(
        "Search", key="q", bind="query-params", placeholder="run id, cell, method, model or data set (all words)"
    )
    columns = st.columns(len(FILTERS) + 1)
    keep = searched(runs, text)
    for column, (field, label) in zip(columns, FILTERS.items(), strict=False):
        picked = column.multiselect(
            label,
            sorted(runs[field].dropna().unique()),
            placeholder="all",
            key=field,
            bind="query-params",
            format_func=visible,
        )
        if picked:
            keep &= runs[field].isin(picked)
    matrices = columns[-1].multiselect("Matrix", matrix_names(), placeholder="any", key="matrix", bind="query-params")
    if matrices:
        members = frozenset().union(*(matrix_members()[m] for m in matrices))
        keep &= runs["cell_id"].isin(members)
    return runs[keep]


def seed_columns(field: str) -> tuple[dict[str, tuple[str, Any]], dict[str, tuple[str, Any]]]:
    """The summary columns a cell's seeds add (grouped by ``cell_group``; none otherwise): the seed indices present,
    and the mean last reward with its unit (a cell is one method, so its rewards share a unit)."""
    if field != "cell_group":
        return {}, {}
    listed = ("seed_index", lambda s: ", ".join(str(i) for i in sorted(set(s))))
    return {"seeds": listed}, {"mean_last_reward": ("last_reward", "mean"), "reward_unit": ("reward_unit", "first")}


def group_summary(shown: pd.DataFrame, field: str) -> pd.DataFrame:
    """Per value of ``field``: runs, finished, collapsed, the means of last step, last validation accuracy and
    training hours, and the summed GPU-hours of the runs with a ledger (``without_ledger`` counts the others), rounded
    to 3 decimals (rewards are left out, as their units differ between methods, except per cell: ``seed_columns``)."""
    seeds, rewards = seed_columns(field)
    summary = shown.groupby(field).agg(
        runs=("run_id", "count"),
        **seeds,
        finished=("status", lambda s: int((s == "finished").sum())),
        collapsed=("collapse", lambda s: int((s != "").sum())),
        mean_last_step=("last_step", "mean"),
        mean_last_val_acc=("last_val_acc", "mean"),
        **rewards,
        mean_train_hours=("wall_hours", "mean"),
        gpu_hours=("gpu_hours", lambda s: s.sum(min_count=1)),
        without_ledger=("gpu_hours", lambda s: int(s.isna().sum())),
    )
    return summary.round(3).reset_index()


def spent(shown: pd.DataFrame) -> str:
    """The GPU-hours the shown runs' ledgers record, and how many runs keep none (never counted as zero)."""
    without = int(shown["gpu_hours"].isna().sum())
    total = f"{shown['gpu_hours'].sum():.2f} GPU-hours measured" if without < len(shown) else "No GPU-hours recorded"
    rest = f"; {without} run(s) without a ledger, not counted" if without else ""
    return f"{total} for the runs shown{rest}. Estimate what is left: `corewarding pipeline run --dry-run`."


require_store()
st.title("Runs")
runs = with_metrics(stored_runs())
shown = filtered(runs)
group = st.radio("Group by", list(GROUP_BY), horizontal=True, key="group", bind="query-params")
st.caption(f"{len(shown)} of {len(runs)} runs. Open a run with its link; tick two or more rows to compare them.")
st.caption(spent(shown))
if GROUP_BY[group]:
    field = str(GROUP_BY[group])
    table(group_summary(shown, field), f"runs-by-{field}")
rows = shown.assign(open="run?" + shown["run_id"].map(lambda r: urlencode({"run": r})))
recorded = ["gpu_hours"] if rows["gpu_hours"].notna().any() else []  # older stores and runs keep no ledger
cut = COLUMNS.index("wall_hours") + 1  # the GPU-hours, where recorded, beside the training hours
picked = st.dataframe(
    visible_frame(rows[[*COLUMNS[:cut], *recorded, *COLUMNS[cut:]]]),  # ids as they are: no bidi or hidden character
    hide_index=True,
    on_select="rerun",
    selection_mode="multi-row",
    key="run_table",
    column_config={"open": st.column_config.LinkColumn("run page", display_text="open"), **NUMBER},
)
chosen = [rows["run_id"].iloc[i] for i in picked.selection.rows]  # type: ignore[attr-defined]
if len(chosen) >= 2:
    st.page_link(
        "views/compare.py",
        label=f"Compare {', '.join(plain(c) for c in chosen)}",
        query_params=[("runs", c) for c in chosen],
    )
elif chosen:
    st.caption("Tick two or more rows to compare them.")
