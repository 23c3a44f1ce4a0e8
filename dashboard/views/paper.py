"""Paper vs reproduction: each cell of a paper table, the measured value, the difference and the checkpoint used; and
the audited released checkpoints beside the paper and the reproduction."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from corewarding.results.cell_verdicts import INTERVAL_RULE, MEANINGS
from corewarding.results.reference import V3_NOT_AVAILABLE
from corewarding.results.report.build import build_report
from dashboard.common import db_path, method_scale, query, require_store, table
from dashboard.released_table import SUBHEADER, released_table

require_store()
st.title("Paper vs reproduction")
st.caption(
    "Paper values are percent (pass@1, AMC avg@8, temperature 0.8). A cell's measured value is the mean over its "
    "seeds of each seed's newest run (`seeds`); base rows come from a base-model evaluation (step null) of a run of "
    f"that model. {INTERVAL_RULE} Verdicts: "
    + "; ".join(f"**{v}**: {m}" for v, m in MEANINGS.items())
    + ". ⚠ marks the IFEval cells that disagree with the paper's own sub-metric tables."
)
tables = query("paper_tables")
choices = query("eval_choices")
checkers = sorted(choices["checker"].unique()) if len(choices) else ["math_verify", "strict"]
left, middle, right = st.columns(3)
coverage = query("paper_coverage")
best_covered = int(coverage["covered"].idxmax()) if len(coverage) and coverage["covered"].max() > 0 else 0
paper_table = left.selectbox(
    "Paper table",
    tables,
    index=best_covered,
    help="opens on the table with most measured cells",
    key="table",
    bind="query-params",
)
checker = middle.selectbox(
    "Checker",
    checkers,
    index=checkers.index("math_verify") if "math_verify" in checkers else 0,
    key="checker",
    bind="query-params",
)
policy = right.radio(
    "Checkpoint",
    ["latest", "best"],
    horizontal=True,
    help="latest: the last evaluated step; best: the step with the highest value (optimistic)",
    key="policy",
    bind="query-params",
)
report_matrix: str = query("report_matrix")
st.download_button(
    "Download the reproduction report (HTML)",
    lambda: build_report(db_path(), report_matrix, checker, policy),  # built on click, like `corewarding report`
    file_name=f"report-{report_matrix}.html",
    mime="text/html",
    on_click="ignore",
    key="report-html",
    help=f"Every cell of the matrix the stored runs belong to ({report_matrix}) beside its paper value, measured value "
    "and interval, the cells outside their interval and the collapse events, in one self-contained file (this "
    "checker and checkpoint)",
)
frame: pd.DataFrame = query("paper_comparison", paper_table, checker, policy)
frame.insert(0, "flag", frame.pop("suspect").map({True: "⚠ suspect", False: ""}))
measured = frame.dropna(subset=["measured"])
st.markdown(f"**{len(measured)} of {len(frame)} cells of {paper_table} measured**")
a, b, c = st.columns(3)
a.metric("Cells measured", f"{len(measured)} / {len(frame)}")
b.metric("Mean |difference| (points)", f"{measured['difference'].abs().mean():.2f}" if len(measured) else "–")
c.metric("Within 2 points", f"{(measured['difference'].abs() <= 2).mean():.0%}" if len(measured) else "–")
if len(measured):
    top = float(max(measured["paper"].max(), measured["measured"].max(), 1.0))
    diagonal = (
        alt.Chart(pd.DataFrame({"x": [0.0, top]})).mark_line(color="grey", strokeDash=[4, 4]).encode(x="x:Q", y="x:Q")
    )
    points = (
        alt.Chart(measured.assign(run_url="run?run=" + measured["run_id"].astype(str)))
        .mark_point(filled=True, size=60)
        .encode(
            href="run_url:N",  # a click opens the run behind the point
            x=alt.X("paper:Q", title="paper (%)"),
            y=alt.Y("measured:Q", title="measured (%)"),
            # legend swatches large and opaque, the shapes' mid grey, visible on the light and the dark theme
            color=alt.Color(
                "method:N",
                scale=method_scale(sorted(measured["method"].unique())),
                legend=alt.Legend(symbolSize=150, symbolOpacity=1, labelLimit=0),
            ),
            shape=alt.Shape(
                "flag:N",
                title="suspect",
                legend=alt.Legend(
                    symbolSize=150, symbolOpacity=1, symbolFillColor="#999999", symbolStrokeColor="#999999"
                ),
            ),
            tooltip=[
                "model",
                "train_set",
                "method",
                "benchmark",
                "metric",
                "paper",
                "measured",
                "difference",
                "checkpoint_step",
                "seeds",
                "verdict",
                "run_id",
            ],
        )
    )
    st.altair_chart((diagonal + points).properties(height=380), width="stretch")
elif query("runs_in_paper_table", paper_table):
    st.info(
        f"Runs of {paper_table}'s cells are in the store, but none has an evaluation under the {checker} checker "
        "yet: run `corewarding evaluate` on them, then `corewarding results ingest`."
    )
else:
    st.info(
        f"No run in the store is a cell of {paper_table}: the paper trained these models on these sets, and the "
        "stored runs are other cells (the demo's tiny cells are none of the paper's), so nothing here is compared. "
        "To see this page with paper-shaped numbers, a preview in a store of its own: `.venv/bin/corewarding results "
        "synthetic --out /tmp/preview`, then `.venv/bin/corewarding dashboard --db /tmp/preview/results.duckdb`."
    )
table(frame, f"paper-vs-reproduction-{paper_table.replace(' ', '-').lower()}")

unpaired: pd.DataFrame = query("runs_without_paper_value")
if len(unpaired):
    st.subheader(f"Runs without a paper value ({len(unpaired)})")
    st.caption(
        f"No paper value is available here for these cells: {V3_NOT_AVAILABLE}, and cells added here have none. "
        "Each cell's newest run is listed with its evaluated steps, not compared and never flagged."
    )
    table(unpaired, "runs-without-paper-value")

st.subheader(SUBHEADER)
released: pd.DataFrame = query("released_comparison", None, checker)
if len(released):
    released_table(released, f"paper-released-reproduced-{checker}")
else:
    st.info(
        f"No released checkpoint is audited under the {checker} checker in this store: run `corewarding audit "
        "--matrix paper_v3` to evaluate the paper's released Hub checkpoints, then `corewarding results ingest`."
    )
failed: pd.DataFrame = query("unaudited", None)
if len(failed):
    st.warning(
        f"{len(failed)} released checkpoint(s) could not be audited (their last audit failed; `corewarding audit` "
        "tries them again): " + "; ".join(f"{r.cell_id}: {r.error}" for r in failed.itertuples())
    )
