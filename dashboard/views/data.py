"""Data quality: the reports of data preparation and rephrasing (rows dropped and why, rejected rephrasings)."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from dashboard.common import query, require_store, table

require_store()
st.title("Data quality")
reports: pd.DataFrame = query("quality_reports")
if reports.empty:
    st.info("No data-quality reports in the store yet (ingest with --data-dir pointing at data/).")
    st.stop()
st.caption(
    "One row per report. unexplained = rows_in − rows_out − dropped: rows that left without a counted reason "
    "(should be 0)."
)
table(reports, "quality-reports")
labels = {r.report_id: f"{r.dataset} · {r.stage} · {r.split} ({r.report_id})" for r in reports.itertuples()}
issues = reports["dropped_total"] + reports["rejected_total"] + reports["flagged_total"]
report_id = st.selectbox(
    "Report",
    list(labels),
    index=int(issues.values.argmax()),
    format_func=labels.get,
    help="opens on the most issues",
    key="report",
    bind="query-params",
)
reasons: pd.DataFrame = query("quality_reasons", report_id)
counted = reasons[reasons["count"] > 0]
if len(counted):
    bars = (
        alt.Chart(counted)
        .mark_bar()
        .encode(
            x=alt.X("count:Q"),
            y=alt.Y("reason:N", sort="-x", title=None),
            color=alt.Color("kind:N", title="rows"),
            tooltip=["kind", "reason", "count"],
        )
    )
    st.altair_chart(bars.properties(height=max(120, 28 * len(counted))), width="stretch")
else:
    st.success("Nothing dropped, rejected or flagged.")
tabs = st.tabs(["Dropped rows", "Rejected rephrasings", "Flagged rows (kept)", "Value counts"])
for tab, kind in zip(tabs, ["dropped", "rejected", "flagged"], strict=False):
    with tab:
        table(query("quality_rows", report_id, kind), f"{kind}-rows")
with tabs[3]:
    table(query("quality_counts", report_id), "value-counts")
