"""One run: its facts and Hub link, training curves, evaluation curves by checkpoint step per benchmark (with their
intervals), its cell's audited released checkpoint beside the paper and the reproduction, collapse events, samples and
system metrics (what the run logged: step time; a verl run's perf/* throughput and peak GPU memory too), and
resolved config. Opened from a heat-map cell (``?cell=``: the cell's newest run), a row of the run table, a point of the
paper scatter, or by its id (``?run=``); with neither, the newest run, written into the URL."""

from __future__ import annotations

import re

import pandas as pd
import streamlit as st

from corewarding.methods import reward_unit
from corewarding.results.collapse import CollapseRules, collapse_events
from corewarding.results.ingest.attempts import failure_note
from dashboard.chart_controls import export_buttons, y_axis_choices
from dashboard.common import (
    UNITS_HELP,
    plain,
    query,
    require_store,
    run_choice,
    stored_runs,
    table,
    visible,
    visible_tree,
)
from dashboard.curves_chart import curves_chart, eval_chart, run_labels, smooth
from dashboard.released_table import SUBHEADER, hub_note, released_table

TRAINING_METRICS = ["val_accuracy", "reward_mean", "label_accuracy", "response_length_mean"]
# What a W&B user reads under "system": each label with the metric names that carry it (ours, then verl's own).
SYSTEM_METRICS = {
    "step time, s": ("step_seconds", "perf/time_per_step"),
    "tokens/s per GPU": ("tokens_per_second", "perf/throughput"),
    "GPU memory allocated, GB": ("gpu_memory_allocated_gb", "perf/max_memory_allocated_gb"),
    "GPU memory reserved, GB": ("gpu_memory_reserved_gb", "perf/max_memory_reserved_gb"),
    "GPU utilisation, %": ("gpu_utilization",),
}


def picked_run(runs: pd.DataFrame) -> str:
    """The run named in the URL (``run=`` a run id or a cell id, or ``cell=``: the cell's newest run), else the
    newest run; an unknown name stops the page with one message."""
    return run_choice("Run", list(runs["run_id"]), "run", alias="cell")


def facts(run: dict[str, object], metrics: pd.DataFrame) -> None:
    """Who the run is (one line of text, never cut) and five short cards: status, steps, last validation accuracy,
    last mean reward (its unit in the label's help) and training hours."""
    who = [("method", run["method"]), ("base model", run["base_model"]), ("dataset", run["dataset"]),
           ("backend", run["backend"]), ("started", run["started_at"])]  # fmt: skip
    st.markdown(" · ".join(f"**{label}** {plain(value)}" for label, value in who))
    last = metrics.iloc[0] if len(metrics) else pd.Series(dtype=object)
    unit = reward_unit(str(run["method"]))
    cards = [
        ("Status", visible(str(run["status"])), "the run's status in run.json"),
        ("Steps", f"{run['last_step']}/{run['total_steps']}" if pd.notna(run["last_step"]) else "–",
         "last logged step / total steps"),
        ("Val acc", _number(last.get("last_val_acc")), "validation accuracy at the last step that logged it"),
        (f"Reward ({unit})", _number(last.get("last_reward")),
         f"mean reward at the last training step, in {unit} ({UNITS_HELP})"),
        ("Train hours", _number(last.get("wall_hours"), 2), "training wall time: the sum of step_seconds"),
    ]  # fmt: skip
    for column, (label, value, help_text) in zip(st.columns(len(cards)), cards, strict=True):
        column.metric(label, value, help=help_text)


def file_name(run_id: str) -> str:
    """A run id as a download's file name: letters, digits, dots and dashes; anything else an underscore."""
    return re.sub(r"[^\w.-]", "_", run_id)


def _number(value: object, digits: int = 3) -> str:
    return "–" if value is None or pd.isna(value) else f"{float(value):.{digits}f}"  # type: ignore[arg-type]


def system_metrics(run_id: str, backend: str, labels: pd.DataFrame) -> None:
    """The run's system metrics: a summary row and a curve each for what it logged; one line naming what its backend
    does not record."""
    logged = set(query("metric_names_of", run_id))
    found = {
        label: next(n for n in names if n in logged) for label, names in SYSTEM_METRICS.items() if logged & set(names)
    }
    absent = [label for label in SYSTEM_METRICS if label not in found]
    if found:
        curves = query("training_curves", [run_id], list(found.values()))
        curves = curves.assign(metric=curves["metric"].map({n: label for label, n in found.items()}))
        stats = curves.groupby("metric", sort=False)["value"].agg(["count", "last", "mean", "max"]).round(3)
        table(stats.rename(columns={"count": "steps"}).reset_index(), f"system-{run_id}")
        shown = smooth(curves, 0.0)
        st.altair_chart(curves_chart(shown, shown.head(0), labels, list(found), "step", 4), width="stretch")
    if absent:
        st.caption(f"Not recorded by this backend ({plain(backend)}): {', '.join(absent)}.{NOT_KEPT.get(backend, '')}")
    hours = query("gpu_hours")
    recorded = hours.loc[hours["run_id"] == run_id, "gpu_hours"].dropna()
    if len(recorded):
        st.caption(f"GPU-hours (run.json's ledger): {float(recorded.iloc[0]):.2f}.")


NOT_KEPT = {
    "local": " The one-device backend times its steps only.",
    "verl": " A verl run keeps verl's perf/* figures (training/verl/metrics.py): one missing here was not in its log.",
}


require_store()
st.title("Run")
runs = stored_runs()
run_id = picked_run(runs)
run = query("run_detail", run_id)
failures = query("failed_cells", [str(run["cell_id"])])
if len(failures):  # the cell's newest attempt failed: this run is not its result for the config that attempt ran
    st.error(f"{plain(run['cell_id'])}: {plain(failure_note(failures.iloc[0].to_dict()))}")
metrics = query("run_metrics")
facts(run, metrics[metrics["run_id"] == run_id])
links = st.columns(4)
if isinstance(run.get("published_commit"), str):  # a push is recorded: the Hub page, in a new tab
    links[0].link_button(f"Hub: {plain(run['hub_repo_id'])}", f"https://huggingface.co/{run['hub_repo_id']}")
else:
    links[0].caption(plain(hub_note(str(run["cell_id"]), run["hub_repo_id"])))
links[1].page_link("views/samples.py", label="Its samples", query_params={"run": run_id})
links[2].page_link("views/curves.py", label="Beside the other runs", query_params={"methods": str(run["method"])})
others = [r for r in runs["run_id"] if r != run_id]
if others:
    links[3].page_link(
        "views/compare.py", label="Compare with another run", query_params=[("runs", run_id), ("runs", others[0])]
    )

labels = run_labels(runs[runs["run_id"] == run_id])
st.subheader("Training curves")
curves = smooth(query("training_curves", [run_id], TRAINING_METRICS), 0.6)
events = collapse_events(query("collapse_inputs", [run_id]), CollapseRules())
y = y_axis_choices()  # the training and evaluation charts' y axes: log, zoom, a fixed range (in the URL)
if curves.empty:
    st.info("This run logged no training metrics.")
else:
    present = [m for m in TRAINING_METRICS if m in set(curves["metric"])]
    chart = curves_chart(curves, events, labels, present, "step", 4, y)
    st.altair_chart(chart, width="stretch")
    export_buttons(chart, f"training-curves-{file_name(run_id)}")

st.subheader("Evaluation by checkpoint")
checker = st.radio("Checker", ["math_verify", "strict"], horizontal=True, key="checker", bind="query-params")
evals = query("eval_curves", [run_id], checker)
if evals.empty:
    st.info(f"No checkpoint of this run is evaluated under {checker}.")
else:
    chart = eval_chart(evals, labels, y=y)
    st.altair_chart(chart, width="stretch")
    export_buttons(chart, f"evaluation-{file_name(run_id)}")
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

st.subheader("System metrics")
system_metrics(run_id, str(run["backend"]), labels)

st.subheader("Resolved config")
if run["config"]:
    st.json(visible_tree(run["config"]), expanded=1)
else:
    st.caption("Not in the store: ingest the run again (`corewarding results ingest`) to record its config.")
st.caption(
    f"Run folder: {plain(run['run_dir'])} · config hash {plain(run['config_hash'])} · code {plain(run['code_version'])}"
)
