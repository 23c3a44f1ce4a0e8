"""One run: its facts and Hub link, training curves, evaluation curves by checkpoint step per benchmark (with their
intervals), its cell's audited released checkpoint beside the paper and the reproduction, collapse events, samples and
resolved config. Opened from a heat-map cell (``?cell=``), a row of the run table, a point of the paper scatter, or by
its id (``?run=``)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from corewarding.results.attempts import failure_note
from corewarding.results.collapse import CollapseRules, collapse_events
from dashboard.common import plain, query, require_store, run_choice, stored_runs, table
from dashboard.curves_chart import curves_chart, eval_chart, run_labels, smooth
from dashboard.released_table import SUBHEADER, released_table

TRAINING_METRICS = ["val_accuracy", "reward_mean", "label_accuracy", "response_length_mean"]


def picked_run(runs: pd.DataFrame) -> str:
    """The run named in the URL (``run=`` a run id or a cell id, or ``cell=``: the cell's newest run), else the
    newest run."""
    return run_choice("Run", list(runs["run_id"]), "run", alias="cell")


require_store()
st.title("Run")
runs = stored_runs()
run_id = picked_run(runs)
run = query("run_detail", run_id)
failures = query("failed_cells", [str(run["cell_id"])])
if len(failures):  # the cell's newest attempt failed: this run is not its result for the config that attempt ran
    st.error(f"{plain(run['cell_id'])}: {plain(failure_note(failures.iloc[0].to_dict()))}")
facts = st.columns(5)
facts[0].metric("Status", str(run["status"]))
facts[1].metric("Steps", f"{run['last_step']}/{run['total_steps']}" if pd.notna(run["last_step"]) else "–")
facts[2].metric("Method", str(run["method"]))
facts[3].metric("Base model", str(run["base_model"]))
facts[4].metric("Dataset", str(run["dataset"]))
links = st.columns(4)
if isinstance(run.get("published_commit"), str):  # a push is recorded: the Hub page, in a new tab
    links[0].link_button(f"Hub: {plain(run['hub_repo_id'])}", f"https://huggingface.co/{run['hub_repo_id']}")
else:
    links[0].caption(f"not published ({plain(run['hub_repo_id'])})")
links[1].page_link("views/samples.py", label="Its samples", query_params={"run": run_id})
links[2].page_link("views/curves.py", label="Beside the other runs", query_params={"methods": str(run["method"])})
others = [r for r in runs["run_id"] if r != run_id]
if others:
    links[3].page_link("views/compare.py", label="Compare with another run", query_params={"a": run_id, "b": others[0]})

labels = run_labels(runs[runs["run_id"] == run_id])
st.subheader("Training curves")
curves = smooth(query("training_curves", [run_id], TRAINING_METRICS), 0.6)
events = collapse_events(query("collapse_inputs", [run_id]), CollapseRules())
if curves.empty:
    st.info("This run logged no training metrics.")
else:
    present = [m for m in TRAINING_METRICS if m in set(curves["metric"])]
    st.altair_chart(curves_chart(curves, events, labels, present, "step", 4), width="stretch")

st.subheader("Evaluation by checkpoint")
checker = st.radio("Checker", ["math_verify", "strict"], horizontal=True, key="checker", bind="query-params")
evals = query("eval_curves", [run_id], checker)
if evals.empty:
    st.info(f"No checkpoint of this run is evaluated under {checker}.")
else:
    st.altair_chart(eval_chart(evals, labels), width="stretch")
    table(evals, f"eval-{run_id}")

steps = sorted(int(x) for x in evals["step"].dropna().unique()) if len(evals) else []
published = f", published to the Hub: step {int(run['published_step'])}" if pd.notna(run["published_step"]) else ""
st.caption(f"Checkpoints evaluated: {', '.join(map(str, steps)) or 'none'}{published}.")

released = query("released_comparison", [str(run["cell_id"])], checker)
if len(released):
    st.subheader(SUBHEADER)
    if (released["run_id"].dropna() != run_id).any():
        st.caption(f"The reproduced column is the cell's newest evaluated run, not {plain(run_id)}.")
    released_table(released, f"released-{run['cell_id']}")
else:
    st.caption(f"No released checkpoint of {plain(run['cell_id'])} is audited under {checker} (`corewarding audit`).")

st.subheader("Collapse events")
if events.empty:
    st.caption("None under the default rules (the Training curves page can change them).")
else:
    table(events, f"collapses-{run_id}")

st.subheader("Samples of the newest evaluated checkpoint")
summary = query("sample_summary", run_id, int(steps[-1]) if steps else None)
if summary.empty:
    st.caption("No samples stored for this checkpoint.")
else:
    table(summary, f"samples-{run_id}")

st.subheader("Resolved config")
if run["config"]:
    st.json(run["config"], expanded=1)
else:
    st.caption("Not in the store: ingest the run again (`corewarding results ingest`) to record its config.")
st.caption(
    f"Run folder: {plain(run['run_dir'])} · config hash {plain(run['config_hash'])} · code {plain(run['code_version'])}"
)
