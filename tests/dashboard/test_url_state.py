"""Issue 33: every choice of the Run, Compare and Runs pages is in the URL and survives a reload; an unknown run is one
message, never another run; the run table's metric columns and search; the run page's system metrics. Rendered with
Streamlit's AppTest (the browser checks are in test_browser_navigation.py)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from corewarding.methods import reward_unit
from corewarding.results.ingest.ingestion import ingest
from corewarding.results.store.store import reader, writer
from dashboard import queries
from dashboard.common import plain
from tests.support.apptest import render

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")
CELL = "co_rewarding_2__qwen2.5-7b__math"
A, B, C = "gt_grpo__qwen2.5-3b__math", "co_rewarding_2__qwen2.5-3b__math", "entropy__qwen2.5-3b__math"


def test_the_run_page_writes_its_default_run_into_the_url(app: AppTest) -> None:
    render(app, "views/run.py")
    shown = app.selectbox(key="run").value
    assert app.query_params == {"run": shown}  # a copied link keeps naming this run when newer runs are added
    app.run()
    assert app.selectbox(key="run").value == shown and not app.exception


def test_an_unknown_run_is_one_message_and_no_other_run(app: AppTest) -> None:
    render(app, "views/run.py", cell="does_not_exist_[x](http://e.x)")
    assert [e.value for e in app.error] == [
        f"No run or cell {plain('does_not_exist_[x](http://e.x)')} in this store ({plain(app_db(app))}). "
        "Pick a run on the Runs page, or check the link."
    ]
    assert not app.selectbox and not app.metric and not app.subheader  # nothing of another run
    assert app.query_params == {"cell": "does_not_exist_[x](http://e.x)"}  # the link is left as it was


def app_db(app: AppTest) -> Path:
    """The store the app under test reads (the fixture sets it in the environment)."""
    del app
    return Path(os.environ["COREWARDING_RESULTS_DB"]).resolve()


def test_picking_another_run_leaves_one_consistent_address(app: AppTest) -> None:
    render(app, "views/run.py", cell=CELL)
    assert app.selectbox(key="run").value.startswith(CELL + "@")
    assert app.query_params == {"cell": CELL}  # a cell link keeps meaning "the cell's newest run"
    other = next(o for o in app.selectbox(key="run").options if not o.startswith(CELL))
    app.selectbox(key="run").set_value(other).run()
    assert app.query_params == {"run": other}  # no stale cell= beside run=
    app.run()  # a reload of that address
    assert app.selectbox(key="run").value == other and app.metric[0].label == "Status"


@pytest.mark.parametrize("checker", ["math_verify", "strict"])  # the default (not in the URL), or bound in the URL
def test_picking_another_run_keeps_the_other_choices(app: AppTest, checker: str) -> None:
    render(app, "views/run.py", cell=CELL, checker=checker)
    other = next(o for o in app.selectbox(key="run").options if not o.startswith(CELL))
    app.selectbox(key="run").set_value(other).run()
    assert app.query_params == {"run": other, **({"checker": checker} if checker == "strict" else {})}
    assert app.radio(key="checker").value == checker


def test_compare_keeps_its_pair_over_reloads_and_takes_a_third_run(app: AppTest) -> None:
    render(app, "views/compare.py", a=A, b=B)
    pair = app.multiselect(key="runs").value
    assert [p.split("@")[0] for p in pair] == [A, B]
    differing = app.subheader[0].value
    assert app.query_params == {"a": A, "b": B}  # not stripped
    for _ in range(2):
        app.run()
        assert app.multiselect(key="runs").value == pair and app.subheader[0].value == differing
    third = next(o for o in app.multiselect(key="runs").options if o.startswith(C))
    app.multiselect(key="runs").set_value([*pair, third]).run()
    assert app.query_params == {"runs": [*pair, third]}  # the new pick replaces a= and b=
    diff = app.dataframe[1].value
    assert list(diff.columns) == ["key", *pair, third, "differs"]
    assert app.subheader[0].value.endswith("differ across 3 runs")
    app.run()
    assert app.multiselect(key="runs").value == [*pair, third]


def test_compare_writes_its_default_runs_and_refuses_unknown_ones(app: AppTest) -> None:
    render(app, "views/compare.py")
    shown = app.multiselect(key="runs").value
    assert len(shown) == 2 and app.query_params == {"runs": shown}
    render(app, "views/compare.py", runs=f"{A},nope")
    assert len(app.error) == 1 and app.error[0].value.startswith("No run or cell nope in this store")
    assert not app.multiselect


def test_compare_with_one_run_asks_for_another(app: AppTest) -> None:
    render(app, "views/compare.py", runs=A)
    assert [i.value for i in app.info] == ["Pick two or more runs to compare."] and not app.dataframe


def test_the_run_table_searches_and_shows_metric_columns(app: AppTest) -> None:
    # words no run id's 8-hex suffix can hold ("7b" alone matched co_rewarding_1__qwen2.5-3b__math@...7b..., a
    # 3% chance per synthetic store)
    render(app, "views/runs.py", q="CO_REWARDING_1 Qwen2.5-7B")
    rows = app.dataframe[-1].value
    assert rows["run_id"].str.startswith("co_rewarding_1__qwen2.5-7b__math@").tolist() == [True]
    assert {"last_val_acc", "last_reward", "reward_unit", "collapse", "wall_hours"} <= set(rows.columns)
    assert app.query_params == {"q": "CO_REWARDING_1 Qwen2.5-7B"}


@pytest.mark.parametrize(
    ("method", "unit"),
    [("gt_grpo", "0/1"), ("majority_voting_rephrased", "0/1"), ("self_certainty", "nats"),
     ("entropy", "-nats"), ("someone_elses", "?")],
)  # fmt: skip
def test_reward_units(method: str, unit: str) -> None:
    assert reward_unit(method) == unit


def test_the_run_page_lists_system_metrics_and_names_the_missing(
    hand_store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COREWARDING_RESULTS_DB", str(hand_store))
    app = render(AppTest.from_file(APP, default_timeout=60), "views/run.py")
    assert app.query_params["run"] == app.selectbox(key="run").value  # the newest: the run started in February
    stats = next(d.value for d in app.dataframe if "steps" in d.value.columns)
    row = stats.set_index("metric").loc["step time, s"]
    assert (row["steps"], row["last"], row["max"]) == (4, 1800.0, 3600.0)  # the hand store's step_seconds
    (note,) = [c.value for c in app.caption if c.value.startswith("Not recorded by this backend")]
    assert "(local): tokens/s per GPU, GPU memory allocated, GB" in note and "GPU utilisation" in note
    assert note.endswith("The one-device backend times its steps only.")
    assert [m.value for m in app.metric][2:] == ["0.200", "0.800", "2.50"]  # val acc, reward, 9000 s of steps


def test_a_verl_runs_perf_figures_are_shown_under_their_labels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What training/verl/metrics.py keeps of verl's perf/* reaches the run page's system table, by label."""
    perf = {"perf/throughput": 812.5, "perf/time_per_step": 9.4, "perf/max_memory_allocated_gb": 61.2}
    run = tmp_path / "runs" / "verl-run"
    run.mkdir(parents=True)
    (run / "config.yaml").write_text("backend: verl\nmethod: {name: gt_grpo}\nbase_model: {name: qwen3-8b-base}\n"
                                     "dataset: {name: math}\n")  # fmt: skip
    (run / "run.json").write_text(json.dumps({"status": "finished", "started_at": "2026-03-01T00:00:00Z",
                                              "backend": "verl"}))  # fmt: skip
    steps = [
        {"step": 1, "reward_mean": 0.25, **perf},
        {"step": 2, "reward_mean": 0.5, **{k: 2 * v for k, v in perf.items()}},
    ]
    (run / "metrics.jsonl").write_text("".join(json.dumps(s) + "\n" for s in steps))
    db = tmp_path / "verl.duckdb"
    ingest(db, run_dirs=[run])
    monkeypatch.setenv("COREWARDING_RESULTS_DB", str(db))
    app = render(AppTest.from_file(APP, default_timeout=60), "views/run.py")
    stats = next(d.value for d in app.dataframe if "steps" in d.value.columns).set_index("metric")
    assert stats.loc["tokens/s per GPU", "last"] == 1625.0
    assert stats.loc["step time, s", "max"] == pytest.approx(18.8)
    assert stats.loc["GPU memory allocated, GB", "mean"] == pytest.approx(91.8)
    (note,) = [c.value for c in app.caption if c.value.startswith("Not recorded by this backend")]
    assert note.startswith("Not recorded by this backend (verl): GPU memory reserved, GB")
    assert "keeps only" not in note and "perf/* figures" in note


def test_the_run_page_after_the_samples_page(app: AppTest) -> None:
    render(app, "views/samples.py")
    render(app, "views/run.py")  # the samples page's picker held "run" for that render: no failure
    newest = app.selectbox(key="run").value
    app.run()  # released now: the default is written
    assert app.query_params["run"] == newest == app.selectbox(key="run").value


def test_gpu_hours_are_shown_where_the_store_records_them(
    synthetic_store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "hours.duckdb"
    shutil.copy(synthetic_store, db)
    app = AppTest.from_file(APP, default_timeout=60)
    monkeypatch.setenv("COREWARDING_RESULTS_DB", str(db))
    assert "gpu_hours" not in set(render(app, "views/runs.py").dataframe[-1].value.columns)  # none recorded
    with writer(db) as con:  # a store with run.json's GPU-hour ledger (added by ingest where the schema has it)
        con.execute("ALTER TABLE runs ADD COLUMN IF NOT EXISTS gpu_hours DOUBLE")
        con.execute("UPDATE runs SET gpu_hours = 1.25 WHERE cell_id = ?", [A])
    rows = render(AppTest.from_file(APP, default_timeout=60), "views/runs.py").dataframe[-1].value
    mine = rows["run_id"].str.startswith(A + "@")
    assert rows.loc[mine, "gpu_hours"].tolist() == [1.25] and rows.loc[~mine, "gpu_hours"].isna().all()
    run = render(AppTest.from_file(APP, default_timeout=60), "views/run.py", cell=A)
    assert "GPU-hours (run.json's ledger): 1.25." in [c.value for c in run.caption]


def test_run_metrics_and_collapse_flags_by_hand(hand_store: Path) -> None:
    with reader(hand_store) as con:
        new, old = queries.runs(con)["run_id"]  # newest first
        metrics = queries.run_metrics(con).set_index("run_id")
        flags = queries.collapse_flags(con).set_index("run_id")
    assert metrics.loc[new].round(6).tolist() == [0.2, 0.8, 2.5]  # val acc at step 4, reward at step 4, 9000 s
    assert metrics.loc[old, "last_reward"] == 0.2 and metrics.loc[old].isna().sum() == 2  # no val acc, no step time
    # length 99 of the cap 100 from step 1 on, then val acc 0.2 against its peak 0.6 at step 4: first onset first
    assert flags.loc[new].tolist() == ["length_at_cap, val_drop", 1] and old not in flags.index
