"""Two runs side by side: their resolved configs, the keys that differ first, and their curves overlaid."""

from __future__ import annotations

import streamlit as st

from dashboard.common import query, require_store, run_choice, stored_runs, table
from dashboard.config_diff import config_diff
from dashboard.curves_chart import curves_chart, run_labels, smooth

METRICS = ["val_accuracy", "reward_mean", "label_accuracy", "response_length_mean"]


require_store()
st.title("Compare two runs")
runs = stored_runs(minimum=2)
options = list(runs["run_id"])
left, right = st.columns(2)
a = run_choice("Run a", options, "a", 0, left)
b = run_choice("Run b", options, "b", 1, right)
configs = [query("run_detail", run)["config"] for run in (a, b)]
missing = [run for run, config in zip((a, b), configs, strict=True) if not config]
if missing:
    st.warning(
        f"No config stored for {', '.join(missing)} (ingested before configs were kept): run `corewarding results "
        "ingest` again to record it."
    )
diff = config_diff(*configs)
differing = int(diff["differs"].sum())
st.subheader(f"Config: {differing} key(s) differ")
table(diff, "config-diff")
chosen = runs[runs["run_id"].isin([a, b])]
curves = smooth(query("training_curves", [a, b], METRICS), 0.6)
if not curves.empty:
    st.subheader("Curves")
    present = [m for m in METRICS if m in set(curves["metric"])]
    st.altair_chart(curves_chart(curves, curves.head(0), run_labels(chosen), present, "step", 4), width="stretch")
