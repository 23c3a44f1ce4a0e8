"""The run page, the run table and the comparison of two runs, and the curves page's evaluation and grouped views,
rendered with Streamlit's AppTest over the synthetic store (12 runs: Qwen2.5-3B and -7B on MATH)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from corewarding.matrix import Cell
from corewarding.results import synthetic
from corewarding.results.ingest.ingestion import ingest
from corewarding.results.store.store import writer
from dashboard.config_diff import config_diff
from tests.support.apptest import render

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")
CELL = "co_rewarding_2__qwen2.5-7b__math"


def test_the_run_page_of_a_cell_named_in_the_url(app: AppTest) -> None:
    render(app, "views/run.py", cell=CELL)
    assert app.title[0].value == "Run"
    assert app.selectbox(key="run").value.startswith(CELL + "@")  # the newest run of the cell
    assert [m.label for m in app.metric] == ["Status", "Steps", "Val acc", "Reward (0/1)", "Train hours"]
    assert "**method** co\\_rewarding\\_2 · **base model** qwen2\\.5\\-7b · **dataset** math" in app.markdown[0].value
    assert [s.value for s in app.subheader] == [
        "Training curves", "Evaluation by checkpoint", "Collapse events",
        "Samples of the newest evaluated checkpoint", "System metrics", "Resolved config",
    ]  # fmt: skip
    evals = app.dataframe[0].value
    assert set(evals["step"]) == {10, 20, 30} and (evals["ci_low"] <= evals["value"]).all()
    assert app.json[0].value and '"co_rewarding_2"' in app.json[0].value  # the resolved config


def test_the_run_table_filters_and_groups(app: AppTest) -> None:
    render(app, "views/runs.py", method="co_rewarding_1")
    rows = app.dataframe[-1].value
    assert set(rows["method"]) == {"co_rewarding_1"} and len(rows) == 2
    assert rows["open"].str.startswith("run?run=co_rewarding_1__").all()
    assert rows["reward_unit"].eq("0/1").all() and rows["last_val_acc"].between(0, 1).all()
    app.multiselect(key="method").set_value([])
    app.radio(key="group").set_value("method").run()
    grouped = app.dataframe[0].value
    assert len(grouped) == 6 and grouped["runs"].sum() == 12
    numbers = grouped.select_dtypes("number")
    assert ((numbers.round(3) == numbers) | numbers.isna()).all().all()  # rounded to 3 decimals (no ledger: NaN)


def test_two_runs_compared_list_the_differing_keys_first(app: AppTest) -> None:
    render(app, "views/compare.py", a="gt_grpo__qwen2.5-3b__math", b="co_rewarding_2__qwen2.5-3b__math")
    a, b = app.multiselect(key="runs").value
    diff = app.dataframe[1].value
    assert list(diff.columns) == ["key", a, b, "differs"]
    assert diff["differs"].iloc[0] and "method.name" in set(diff.loc[diff["differs"], "key"])
    assert not diff["differs"].iloc[-1]  # the keys that agree come after
    assert app.subheader[0].value.startswith("Config: ") and a.startswith("gt_grpo__") and b.startswith("co_rew")


def test_a_run_without_a_stored_config_is_named_not_diffed_as_a_blank_key() -> None:
    diff = config_diff({}, {"method": {"name": "x"}})
    assert diff[["key", "a", "b", "differs"]].values.tolist() == [["method.name", "—", "x", True]]


def test_config_diff_by_hand() -> None:
    diff = config_diff({"a": {"b": 1, "c": 2}, "d": 3}, {"a": {"b": 1, "c": 5}, "e": 4})
    assert diff[["key", "a", "b", "differs"]].values.tolist() == [
        ["a.c", "2", "5", True], ["d", "3", "—", True], ["e", "—", "4", True], ["a.b", "1", "1", False],
    ]  # fmt: skip


def test_config_values_show_as_yaml_and_differ_by_type_not_by_how_they_show() -> None:
    diff = config_diff(
        {"attn": "sdpa", "note": "—", "seed": "1", "stop": None, "flag": True, "lr": 3e-6},
        {"attn": "sdpa", "seed": 1, "stop": None, "flag": False, "lr": 3e-6},
    )
    assert diff[["key", "a", "b", "differs"]].values.tolist() == [
        ["flag", "true", "false", True],
        ["note", "—", "—", True],  # a stored "—" is not an absent key
        ["seed", "1", "1", True],  # the string "1" is not the number 1
        ["attn", "sdpa", "sdpa", False],
        ["lr", "3e-06", "3e-06", False],
        ["stop", "null", "null", False],
    ]


@pytest.mark.parametrize("group", ["method", "dataset"])
def test_curves_grouped_draw_one_band_per_group(app: AppTest, group: str) -> None:
    render(app, "views/curves.py", group=group, base_models="qwen2.5-3b")
    app.multiselect(key="base_models").set_value(["qwen2.5-3b", "qwen2.5-7b"]).run()
    spec_groups = {"method": 6, "dataset": 1}[group]
    assert f"12 runs in {spec_groups} groups by {group}" in app.caption[0].value
    app.selectbox(key="band").set_value("mean ± std").run()  # the spread across the group's runs instead
    assert not app.exception and f"{spec_groups} groups" in app.caption[0].value


def test_curves_of_evaluation_by_checkpoint(app: AppTest) -> None:
    render(app, "views/curves.py", source="evaluation by checkpoint")
    assert app.radio(key="source").value == "evaluation by checkpoint" and app.get("vega_lite_chart")
    assert not [w for w in app.warning if "settings differ" in w.value]  # the synthetic runs share one protocol


def test_evaluation_curves_flag_scores_produced_under_differing_settings(
    synthetic_store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "seeds.duckdb"
    shutil.copy(synthetic_store, db)
    with writer(db) as con:  # gt_grpo's runs evaluated again with another seed on MATH500 only
        con.execute(
            "UPDATE eval_metrics SET settings = replace(settings, '\"seed\": 0', '\"seed\": 1'), "
            "settings_key = 'other' WHERE run_id LIKE 'gt_grpo__%' AND benchmark = 'MATH500'"
        )
    monkeypatch.setenv("COREWARDING_RESULTS_DB", str(db))
    app = render(AppTest.from_file(APP, default_timeout=60), "views/curves.py", source="evaluation by checkpoint")
    (warning,) = [w.value for w in app.warning if "settings differ" in w.value]
    assert "settings differ between the scores shown" in warning
    assert warning.endswith(": MATH500 (seed)")  # the other benchmarks share one protocol


def test_compare_names_a_run_ingested_before_configs_were_kept(
    synthetic_store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "old.duckdb"
    shutil.copy(synthetic_store, db)
    with writer(db) as con:
        con.execute("UPDATE runs SET config = NULL WHERE method = 'gt_grpo'")
    monkeypatch.setenv("COREWARDING_RESULTS_DB", str(db))
    app = render(AppTest.from_file(APP, default_timeout=60), "views/compare.py", a=CELL, b="gt_grpo__qwen2.5-3b__math")
    assert "No config stored for gt\\_grpo\\_\\_qwen2\\.5\\-3b\\_\\_math@" in app.warning[-1].value
    assert "results ingest" in app.warning[-1].value and "" not in set(app.dataframe[1].value["key"])


def test_the_run_table_sums_gpu_hours_per_group_and_counts_runs_without_a_ledger(
    synthetic_store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "ledger.duckdb"
    shutil.copy(synthetic_store, db)
    with writer(db) as con:  # the synthetic runs keep no ledger; give co_rewarding_1's two runs 1.25 GPU-hours each
        con.execute("UPDATE runs SET gpu_hours = 1.25 WHERE method = 'co_rewarding_1'")
    monkeypatch.setenv("COREWARDING_RESULTS_DB", str(db))
    app = render(AppTest.from_file(APP, default_timeout=60), "views/runs.py", group="method")
    grouped = app.dataframe[0].value.set_index("method")
    assert grouped.loc["co_rewarding_1", "gpu_hours"] == 2.5 and grouped.loc["co_rewarding_1", "without_ledger"] == 0
    assert pd.isna(grouped.loc["gt_grpo", "gpu_hours"]) and grouped.loc["gt_grpo", "without_ledger"] == 2  # not 0 h
    spent = [c.value for c in app.caption if "GPU-hours" in c.value]
    assert spent == [
        "2.50 GPU-hours measured for the runs shown; 10 run(s) without a ledger, not counted. "
        "Estimate what is left: `corewarding pipeline run --dry-run`."
    ]


def test_the_run_table_groups_a_cells_seeds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seeded = [Cell("gt_grpo", "qwen2.5-3b", "math", seed) for seed in (0, 1)]
    other = Cell("co_rewarding_1", "qwen2.5-3b", "math")
    runs, data = synthetic.write_result_set(tmp_path, [*seeded, other], synthetic.SyntheticSpec())
    for cell, (reward, acc) in zip([*seeded, other], [(0.4, 0.5), (0.7, 0.8), (0.9, 0.1)], strict=True):
        lines = [{"step": 1, "reward_mean": 0.1}, {"step": 2, "reward_mean": reward, "val_accuracy": acc}]
        (runs / cell.cell_id / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    ingest(tmp_path / "seeds.duckdb", [runs], data_dirs=[data])
    monkeypatch.setenv("COREWARDING_RESULTS_DB", str(tmp_path / "seeds.duckdb"))
    app = render(AppTest.from_file(APP, default_timeout=60), "views/runs.py", group="cell (seeds)")
    grouped = app.dataframe[0].value.set_index("cell_group")
    assert grouped.index.tolist() == [other.cell_id, seeded[0].cell_id]  # one row per cell, its seeds together
    cell = grouped.loc[seeded[0].cell_id]
    assert (cell["runs"], cell["seeds"], cell["finished"], cell["reward_unit"]) == (2, "0, 1", 2, "0/1")
    assert (cell["mean_last_reward"], cell["mean_last_val_acc"]) == (0.55, 0.65)  # (0.4 + 0.7) / 2, (0.5 + 0.8) / 2
    assert grouped.loc[other.cell_id, ["runs", "seeds", "mean_last_reward"]].tolist() == [1, "0", 0.9]
    rows = app.dataframe[-1].value
    assert list(rows.columns[:3]) == ["open", "run_id", "seed_index"]  # the seed beside the run id
    seeds = dict(zip(rows["run_id"].str.split("@").str[0], rows["seed_index"], strict=True))
    assert seeds == {seeded[0].cell_id: 0, seeded[1].cell_id: 1, other.cell_id: 0}
