"""Two or more runs side by side: their last metrics, their resolved configs (one column per run, the differing keys
first) and their curves on one chart. The runs are in the URL (``compare?runs=A&runs=B&runs=C``; a cell stands for its
newest run; ``?a=..&b=..`` links still open)."""

from __future__ import annotations

import streamlit as st

from corewarding.methods import reward_unit
from dashboard.common import plain, query, require_store, runs_choice, stored_runs, table
from dashboard.config_diff import config_table
from dashboard.curves_chart import curves_chart, run_labels, smooth

METRICS = ["val_accuracy", "reward_mean", "label_accuracy", "response_length_mean"]
SUMMARY = ["run_id", "method", "base_model", "dataset", "status", "last_step", "last_val_acc", "last_reward"]


require_store()
st.title("Compare runs")
runs = stored_runs(minimum=2)
chosen = runs_choice("Runs (two or more)", list(runs["run_id"]), "runs", legacy=("a", "b"))
if len(chosen) < 2:
    st.info("Pick two or more runs to compare.")
    st.stop()
picked = runs.set_index("run_id").loc[chosen].reset_index()
summary = picked.merge(query("run_metrics"), on="run_id", how="left")[SUMMARY]
table(summary.assign(reward_unit=summary["method"].map(reward_unit)).round(3), "compare-summary")

configs = {run: query("run_detail", run)["config"] for run in chosen}
missing = [run for run, config in configs.items() if not config]
if missing:
    st.warning(
        f"No config stored for {', '.join(plain(m) for m in missing)} (ingested before configs were kept): run "
        "`corewarding results ingest` again to record it."
    )
diff = config_table(configs)
differing = int(diff["differs"].sum())
st.subheader(f"Config: {differing} key(s) differ across {len(chosen)} runs")
only = st.toggle("Only the differing keys", key="only_diff", bind="query-params")
table(diff[diff["differs"]] if only else diff, "config-diff")

curves = smooth(query("training_curves", chosen, METRICS), 0.6)
st.subheader("Curves")
if curves.empty:
    st.info("None of these runs logged training metrics.")
else:
    present = [m for m in METRICS if m in set(curves["metric"])]
    st.altair_chart(curves_chart(curves, curves.head(0), run_labels(picked), present, "step", 4), width="stretch")
