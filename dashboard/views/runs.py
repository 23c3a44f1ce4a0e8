"""The run table: every ingested run with its seed, last validation accuracy, last mean reward (and its unit), collapse
flag and training hours; searched by text, filtered by method, base model, data set, status and matrix, optionally
grouped (rounded summaries; "cell (seeds)" gives one row per cell, its seeds summarised); each row opens its run page,
and two or more picked rows open their comparison.

W&B-style columns (``dashboard/run_columns.py``): any training metric (last, or best), any benchmark score (newest or
best checkpoint, under the chosen checker) and any config key can be added; the table sorts by any shown column and
filters on any (a threshold, a text it contains, empty or not). The choice lives in the URL (``col=``, ``sort=``,
``order=``, ``filter=``), allow-listed against the store: what the store does not hold is left out with a note."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import urlencode

import pandas as pd
import streamlit as st

from corewarding.matrix import load_matrix, matrix_names
from corewarding.methods import reward_unit
from dashboard import run_columns
from dashboard.common import UNITS_HELP, plain, query, require_store, stored_runs, table, visible, visible_frame
from dashboard.config_diff import ABSENT
from dashboard.run_columns import Choice, Column, Filter

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


CHECKERS = ["math_verify", "strict"]
FIXED = ["open", "run_id"]  # always shown, first
CHOICE_PARAMS = ("col", "sort", "order", "filter")  # the URL parameters of the column, sort and filter choice
ORDERS = ["descending", "ascending"]


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


def builtin_columns(recorded: bool) -> dict[str, Column]:
    """The table's own columns, by name, in their order (GPU-hours, where ``recorded``, beside the training hours)."""
    cut = COLUMNS.index("wall_hours") + 1
    names = [*COLUMNS[2:cut], *(["gpu_hours"] if recorded else []), *COLUMNS[cut:]]
    return {n: Column(n, str(NUMBER[n]["label"]) if n in NUMBER else n) for n in names}


def store_choices(checker: str) -> dict[str, Column]:
    """The columns the store can add (``run_columns.store_columns``), evaluations under ``checker``."""
    keys = sorted(query("run_configs")["key"].unique())
    return run_columns.store_columns(query("training_metric_names"), query("run_eval_choices", checker), keys)


def store_values(columns: Sequence[Column], checker: str) -> pd.DataFrame:
    """The values of the chosen store columns, one row per run (index run_id): one query per kind, not per column."""
    train = sorted({c.name for c in columns if c.kind == "train"})
    evals = [c for c in columns if c.kind == "eval"]
    benchmarks, metrics = sorted({c.name for c in evals}), sorted({c.metric for c in evals})
    return run_columns.column_values(
        columns,
        query("training_summaries", train) if train else pd.DataFrame(),
        query("eval_summaries", checker, benchmarks, metrics) if evals else pd.DataFrame(),
        query("run_configs") if any(c.kind == "config" for c in columns) else pd.DataFrame(),
    )


def write_choice(choice: Choice, defaults: Sequence[str]) -> None:
    """Make the URL's column, sort and filter parameters say ``choice`` (the others kept; what is set, set at once)."""
    wanted = run_columns.url_params(choice, defaults)
    for name in CHOICE_PARAMS:
        if name not in wanted and name in st.query_params:
            del st.query_params[name]
    changed = {
        name: value
        for name, value in wanted.items()
        if st.query_params.get_all(name) != ([value] if isinstance(value, str) else value)
    }
    if changed:
        st.query_params.update(changed)  # one address change: sort and order arrive together


def widgets_choice(extra: Filter | None = None) -> Choice:
    """The choice the widgets hold now (a sort or filter on a column no longer shown is dropped), plus ``extra``."""
    columns = tuple(st.session_state["run_columns"])
    shown = {"run_id", *columns}
    sort = st.session_state["run_sort"] or None
    filters = [f for f in st.session_state["run_filters"] if f.key in shown]
    if extra is not None and extra not in filters:
        filters.append(extra)
    descending = st.session_state["run_order"] == ORDERS[0]
    return Choice(columns, sort if sort in shown else None, descending, tuple(filters))


def to_url(defaults: Sequence[str]) -> None:
    """on_change of the column, sort and filter widgets: their choice into the URL."""
    write_choice(widgets_choice(), defaults)


def add_filter(defaults: Sequence[str]) -> None:
    """The "Add filter" button: the new filter joins the URL's (checked on the next render like any other)."""
    op = st.session_state["new_filter_op"]
    value = "" if op in run_columns.EMPTY_OPS else str(st.session_state["new_filter_value"]).strip()
    write_choice(widgets_choice(Filter(st.session_state["new_filter_column"], op, value)), defaults)


def filter_label(f: Filter, allowed: dict[str, Column]) -> str:
    """A filter as its chip shows it: the column's header, the operator, the value (as typed)."""
    return visible(f"{allowed[f.key].label} {f.op}" + ("" if f.op in run_columns.EMPTY_OPS else f" {f.value}"))


def typed(choice: Choice, runs: pd.DataFrame) -> tuple[Choice, list[str]]:
    """``choice`` without the filters that cannot apply to their column's values, and why each was dropped."""
    kept, dropped = [], []
    for f in choice.filters:
        problem = run_columns.filter_problem(f, runs[f.key])
        if problem is None:
            kept.append(f)
        else:
            dropped.append(f"filter {f.text()} ({problem})")
    return Choice(choice.columns, choice.sort, choice.descending, tuple(kept)), dropped


def controls(
    choice: Choice, allowed: dict[str, Column], defaults: list[str], options: list[str], places: Sequence[Any]
) -> None:
    """The column picker, the sort column and direction, the filters and the form that adds one, showing ``choice``
    (each change goes into the URL, from which the next render reads it), in ``places``: the picker's, the sort's,
    the order's."""
    shown = ["run_id", *choice.columns]
    st.session_state["run_columns"] = list(choice.columns)
    st.session_state["run_sort"] = choice.sort or ""
    st.session_state["run_order"] = ORDERS[0] if choice.descending else ORDERS[1]
    st.session_state["run_filters"] = list(choice.filters)
    label = {k: visible(c.label) for k, c in allowed.items()}
    picker, sort, order = places
    picker.multiselect(
        "Columns", options, key="run_columns", format_func=label.__getitem__, on_change=to_url, args=(defaults,),
        placeholder="add a metric, a benchmark score or a config key",
        help="Training metrics (last value; best where higher is better), benchmark scores at the newest or the best "
        "evaluated checkpoint (under the checker below), and config keys; what the store holds.",
    )  # fmt: skip
    sort.selectbox(
        "Sort by", ["", *shown], key="run_sort", on_change=to_url, args=(defaults,),
        format_func=lambda k: label[k] if k else "newest run first",
    )  # fmt: skip
    order.radio("Order", ORDERS, key="run_order", horizontal=True, on_change=to_url, args=(defaults,))
    st.multiselect(
        "Column filters", list(choice.filters), key="run_filters", format_func=lambda f: filter_label(f, allowed),
        on_change=to_url, args=(defaults,), placeholder="none (add one below)",
    )  # fmt: skip
    with st.expander("Add a column filter"), st.form("add_filter", border=False):
        column, op, value, button = st.columns([4, 2, 3, 2], vertical_alignment="bottom")
        column.selectbox("Column", shown, key="new_filter_column", format_func=label.__getitem__)
        op.selectbox("Operator", run_columns.OPS[::-1], key="new_filter_op",
                     help="numbers: >, >=, <, <=, =, != (rows with no value never match); text: contains (any case), "
                     "=, !=; any column: is empty, is not empty")  # fmt: skip
        value.text_input("Value", key="new_filter_value", placeholder="0.5, or a text")
        button.form_submit_button("Add filter", on_click=add_filter, args=(defaults,), key="add_filter_button")


def store_column_config(columns: Sequence[Column], rows: pd.DataFrame, checker: str) -> dict[str, Any]:
    """Each added column's header and format (a benchmark score to 3 decimals), keyed as the shown frame names it."""
    out: dict[str, Any] = {}
    for c in columns:
        help_ = f"{c.help} ({checker})" if c.kind == "eval" else c.help
        if pd.api.types.is_numeric_dtype(rows[c.key]):
            fmt = "%.3f" if c.kind == "eval" else "%.4g" if c.kind == "train" else None
            out[visible(c.key)] = st.column_config.NumberColumn(visible(c.label), format=fmt, help=help_)
        else:
            out[visible(c.key)] = st.column_config.TextColumn(visible(c.label), help=help_)
    return out


require_store()
st.title("Runs")
runs = with_metrics(stored_runs())
listed = filtered(runs).index  # the search and the pickers above
group = st.radio("Group by", list(GROUP_BY), horizontal=True, key="group", bind="query-params")
picker_place = st.container()
sort_place, order_place, checker_place = st.columns([4, 3, 3])
checker = checker_place.radio("Checker", CHECKERS, horizontal=True, key="checker", bind="query-params",
                              help="the checker whose verdicts the benchmark columns read")  # fmt: skip
builtins = builtin_columns(bool(runs["gpu_hours"].notna().any()))  # older stores and runs keep no ledger
added = store_choices(checker)
allowed = {"run_id": Column("run_id", "run_id"), **builtins, **added}
defaults = list(builtins)
asked = {name: st.query_params.get_all(name) for name in CHOICE_PARAMS if name in st.query_params}
choice, dropped = run_columns.from_url(asked, allowed, defaults, fixed=["run_id"])
picked = [added[k] for k in choice.columns if k in added]
if picked:
    runs = runs.join(store_values(picked, checker), on="run_id")  # keeps the index: ``listed`` names its rows
for column in picked:  # a store with no run that has the value
    if column.key not in runs:
        runs[column.key] = pd.Series(float("nan"), index=runs.index)
choice, untyped = typed(choice, runs)
if dropped or untyped:
    picker_place.warning("Left out of this view (not in this store, under this checker, or not understood): "
                         + "; ".join(plain(d) for d in [*dropped, *untyped]) + ".")  # fmt: skip
    write_choice(choice, defaults)
controls(choice, allowed, defaults, [*builtins, *added], [picker_place, sort_place, order_place])
shown = runs.loc[listed]
shown = shown[run_columns.matching(shown, choice.filters)]
st.caption(f"{len(shown)} of {len(runs)} runs. Open a run with its link; tick two or more rows to compare them.")
st.caption(spent(shown))
if GROUP_BY[group]:
    field = str(GROUP_BY[group])
    table(group_summary(shown, field), f"runs-by-{field}")
rows = run_columns.sorted_rows(shown, choice.sort, choice.descending)
rows = rows.assign(open="run?" + rows["run_id"].map(lambda r: urlencode({"run": r})))
order = [*FIXED, *(c.key for c in picked), *(k for k in builtins if k in choice.columns)]  # added columns first
picked_rows = st.dataframe(
    visible_frame(rows[order]),  # ids as they are: no bidi or hidden character
    hide_index=True,
    on_select="rerun",
    selection_mode="multi-row",
    key="run_table",
    placeholder=ABSENT,  # a missing value is a dash, never "None"
    column_config={
        "open": st.column_config.LinkColumn("run page", display_text="open"),
        **NUMBER,
        **store_column_config(picked, rows, checker),
    },
)
chosen = [rows["run_id"].iloc[i] for i in picked_rows.selection.rows]  # type: ignore[attr-defined]
if len(chosen) >= 2:
    st.page_link(
        "views/compare.py",
        label=f"Compare {', '.join(plain(c) for c in chosen)}",
        query_params=[("runs", c) for c in chosen],
    )
elif chosen:
    st.caption("Tick two or more rows to compare them.")
