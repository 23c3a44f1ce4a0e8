"""Samples: per-sample generations beside their question and gold answer, filtered by benchmark, each checker's
verdict, checker disagreement and truncation; a row clicked opens the full question, gold answer and response."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
import streamlit as st

from dashboard.common import plain, query, require_store, table, visible
from dashboard.queries import SampleFilter

PAGE_SIZE = 50
VERDICT = {"any": None, "correct": True, "incorrect": False}
DISAGREE = {"any": None, "disagree": True, "agree": False}
TRUNCATED = {"any": None, "yes": True, "no": False}


def step_label(step: object) -> str:
    return "base model" if pd.isna(step) else f"step {int(step)}"  # type: ignore[call-overload]


def filters(benchmarks: list[str]) -> SampleFilter:
    """The filter row: benchmark, strict verdict, math-verify verdict, disagreement, truncation."""
    a, b, c, d, e = st.columns([2, 1, 1, 1, 1])
    return SampleFilter(
        benchmarks=tuple(
            a.multiselect("Benchmark", benchmarks, placeholder="all", key="benchmarks", bind="query-params")
        ),
        strict=VERDICT[b.selectbox("Strict", list(VERDICT), key="strict", bind="query-params")],
        math_verify=VERDICT[c.selectbox("Math-verify", list(VERDICT), key="math_verify", bind="query-params")],
        disagree=DISAGREE[d.selectbox("Checkers", list(DISAGREE), key="disagree", bind="query-params")],
        truncated=TRUNCATED[e.selectbox("Truncated", list(TRUNCATED), key="truncated", bind="query-params")],
    )


def selected_row(event: Any) -> int:
    """The row clicked in the table (the first row when none is)."""
    rows = list(getattr(getattr(event, "selection", None), "rows", None) or [])
    return int(rows[0]) if rows else 0


def show_sample(row: pd.Series, run_id: str, step: int | None) -> None:
    """The full question, gold answer and response of one sample, with its verdicts."""
    detail = query("sample_detail", run_id, step, row["benchmark"], row["problem_id"], int(row["sample_index"]))
    # the answer, the gold and the ids come from model output and data files: shown as text (plain), never markdown
    st.markdown(
        f"**{plain(row['benchmark'])} · {plain(row['problem_id'])} · sample #{plain(row['sample_index'])}** — "
        f"extracted: {plain(row['extracted_answer'])} · gold: {plain(detail.get('gold'))} · "
        f"strict: {plain(row['correct_strict'])} · math-verify: {plain(row['correct_math_verify'])} · "
        f"truncated: {plain(row['truncated'])} · {plain(row['length'])} tokens"
    )
    question, response = st.columns(2)
    question.caption("Question")
    missing = "(not stored: evaluated before questions were recorded)"
    question.code(visible(detail.get("question") or missing, multiline=True), language=None, wrap_lines=True)
    question.caption("Gold answer")
    question.code(visible(detail.get("gold") or "(not stored)", multiline=True), language=None, wrap_lines=True)
    response.caption("Response")
    response.code(visible(detail.get("response") or "", multiline=True), language=None, wrap_lines=True)


require_store()
st.title("Samples")
index: pd.DataFrame = query("sample_index")
if index.empty:
    st.info("No evaluation samples in the store yet (ingest runs with eval/samples.parquet).")
    st.stop()
left, right = st.columns([3, 1])
run_id = left.selectbox(
    "Run", list(dict.fromkeys(index["run_id"])), key="run", bind="query-params", format_func=visible
)
mine = index[index["run_id"] == run_id]
steps = list(dict.fromkeys(mine["step"]))
step = right.selectbox(
    "Checkpoint", steps, index=len(steps) - 1, format_func=step_label, key="step", bind="query-params"
)
step = None if pd.isna(step) else int(step)
st.subheader("Per benchmark")
table(query("sample_summary", run_id, step), "sample-summary")

st.subheader("Generations")
where = filters(sorted(mine["benchmark"].unique()))
total = query("sample_count", run_id, step, where)
pages = max(1, math.ceil(total / PAGE_SIZE))
page = st.number_input(f"Page (of {pages}; {total} samples match)", 1, pages, 1, key="page", bind="query-params")
rows: pd.DataFrame = query("samples", run_id, step, where, PAGE_SIZE, (page - 1) * PAGE_SIZE)
st.caption("Click a row to open its full question, gold answer and response below.")
event = table(rows, "samples", on_select="rerun", selection_mode="single-row", key="sample_table")
if len(rows):
    show_sample(rows.iloc[min(selected_row(event), len(rows) - 1)], run_id, step)
