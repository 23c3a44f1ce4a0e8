"""Issue 45: the run table's W&B-style columns. The queries on a hand-made store whose values rank the runs one way
at the newest checkpoint and the other way at the best; the URL choice (allow-listed, filters parsed and applied);
the page under AppTest with its choice in the URL, checked against values read from the store with DuckDB."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pandas as pd
import pytest
import yaml
from streamlit.testing.v1 import AppTest

from corewarding.results.ingest.ingestion import ingest
from corewarding.results.store.store import reader
from dashboard import queries, run_columns
from dashboard.config_diff import ABSENT
from dashboard.run_columns import Choice, Column, Filter
from tests.support.apptest import render

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")
NEWEST, BEST = "eval:MATH500:pass@1:newest", "eval:MATH500:pass@1:best"


def _run(root: Path, name: str, day: int, config: dict[str, object], metrics: list[dict[str, object]],
         evals: list[tuple[object, ...]]) -> Path:  # fmt: skip
    """A run folder as the trainer and evaluator leave it (what ingest reads)."""
    run = root / name
    (run / "eval").mkdir(parents=True)
    (run / "config.yaml").write_text(yaml.safe_dump(config))
    (run / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in metrics))
    started = f"2026-03-{day:02d}T00:00:00Z"
    (run / "run.json").write_text(json.dumps({"status": "finished", "started_at": started, "backend": "local"}))
    if evals:
        frame = pd.DataFrame(evals, columns=["step", "benchmark", "checker", "metric", "value"])
        frame["step"] = frame["step"].astype("Int64")
        frame["n"] = 8
        frame.to_parquet(run / "eval" / "metrics.parquet")
    return run


def _config(tag: str, **more: object) -> dict[str, object]:
    cell = {"method": {"name": "gt_grpo"}, "base_model": {"name": "qwen3-8b-base"}, "dataset": {"name": "math"}}
    return {"backend": "local", **cell, "tag": tag, **more}


@pytest.fixture()
def columns_store(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """Three runs: "a" best at step 10 (0.9) and worst at its newest step 20 (0.4); "b" 0.7 at its newest and best
    step; "c" never evaluated. Returns the store and each run's id by name."""
    root = tmp_path / "runs"
    a = _run(
        root, "a", 1,
        _config("alpha", grpo={"lr": 1e-6, "clip": [0.2, 0.28], "use_kl": True}, note=None, seed=1),
        [{"step": 0, "val_accuracy": 0.3}, {"step": 5, "val_accuracy": 0.9, "reward_mean": 0.2},
         {"step": 10, "val_accuracy": 0.5, "reward_mean": 0.4, "pg_loss": 0.1}],
        [(None, "MATH500", "math_verify", "pass@1", 0.95),  # the base model: never a checkpoint's value
         (10, "math500", "math_verify", "pass@1", 0.9),  # the evaluator's spelling
         (20, "MATH500", "math_verify", "pass@1", 0.4),
         (20, "MATH500", "strict", "pass@1", 0.1),
         (20, "AMC", "math_verify", "avg@8", 0.3)],
    )  # fmt: skip
    b = _run(
        root, "b", 2,
        _config("beta", grpo={"lr": 3e-6, "clip": [0.2], "use_kl": False}, note="kept", seed=2),
        [{"step": 0, "val_accuracy": 0.3}, {"step": 5, "val_accuracy": 0.6}, {"step": 10, "val_accuracy": 0.7}],
        [(10, "MATH500", "math_verify", "pass@1", 0.6), (20, "MATH500", "math_verify", "pass@1", 0.7)],
    )  # fmt: skip
    c = _run(root, "c", 3, _config("gamma", grpo={"lr": "auto"}, seed="x"), [{"step": 1, "reward_mean": 0.5}], [])
    db = tmp_path / "columns.duckdb"
    ingest(db, run_dirs=[a, b, c])
    with duckdb.connect(str(db), read_only=True) as con:
        ids = dict(con.execute("SELECT regexp_extract(run_dir, '[^/]+$'), run_id FROM runs").fetchall())
    return db, ids


def test_a_metric_a_benchmark_at_newest_and_best_and_config_keys(columns_store: tuple[Path, dict[str, str]]) -> None:
    db, ids = columns_store
    a, b, c = ids["a"], ids["b"], ids["c"]
    with reader(db) as con:
        train = queries.training_summaries(con, ["val_accuracy", "reward_mean"])
        evals = queries.eval_summaries(con, "math_verify", ["Math-500"], ["pass@1"])  # any spelling finds MATH500
        strict = queries.eval_summaries(con, "strict", ["MATH500"], ["pass@1"])
        choices = queries.run_eval_choices(con, "math_verify")
        configs = queries.run_configs(con)
        names = queries.training_metric_names(con)
    val = train[train["metric"] == "val_accuracy"].set_index("run_id")
    assert val.loc[a, ["last_step", "last", "best"]].tolist() == [10, 0.5, 0.9]
    assert val.loc[b, ["last", "best"]].tolist() == [0.7, 0.7] and c not in val.index  # c logged no val_accuracy
    scores = evals.set_index("run_id")
    assert scores.loc[a, ["newest_step", "newest", "best_step", "best"]].tolist() == [20, 0.4, 10, 0.9]
    assert scores.loc[b, ["newest_step", "newest", "best_step", "best"]].tolist() == [20, 0.7, 20, 0.7]
    assert set(scores.index) == {a, b} and set(scores["benchmark_key"]) == {"math500"}
    assert strict[["run_id", "newest", "best"]].values.tolist() == [[a, 0.1, 0.1]]  # one checker's rows only
    assert choices.values.tolist() == [["AMC", "avg@8"], ["MATH500", "pass@1"]]  # canonical names, one row each
    leaves = configs[configs["run_id"] == a].set_index("key")
    assert leaves.loc["grpo.lr", ["text", "number"]].tolist() == ["1e-06", 1e-6]
    assert leaves.loc["grpo.clip", "text"] == "[0.2, 0.28]" and pd.isna(leaves.loc["grpo.clip", "number"])  # JSON
    assert leaves.loc["grpo.use_kl", "text"] == "true" and pd.isna(leaves.loc["grpo.use_kl", "number"])
    assert "note" not in leaves.index and "method.name" in leaves.index  # a null leaf is a missing value

    allowed = run_columns.store_columns(names, choices, sorted(configs["key"].unique()))
    assert {"train:val_accuracy:best", "train:reward_mean:best"} <= set(allowed)
    assert "train:pg_loss:last" in allowed and "train:pg_loss:best" not in allowed  # no "best" loss
    assert allowed[NEWEST].label == "MATH500 pass@1 (newest ckpt)"
    assert allowed["config:grpo.lr"].label == "config.grpo.lr"
    picked = [allowed[k] for k in (NEWEST, BEST, "train:val_accuracy:best", "config:grpo.lr", "config:seed")]
    values = run_columns.column_values(picked, train, evals, configs)
    assert values.loc[a, [NEWEST, BEST, "train:val_accuracy:best"]].tolist() == [0.4, 0.9, 0.9]
    assert not pd.api.types.is_numeric_dtype(values["config:grpo.lr"])  # "auto" (a text) in c: the column is text
    assert values.loc[[a, b, c], "config:grpo.lr"].tolist() == ["1e-06", "3e-06", "auto"]
    assert values.loc[[a, b], "config:seed"].tolist() == ["1", "2"]  # c's seed "x" makes it text as well
    frame = values.reindex([c, b, a]).reset_index()
    assert run_columns.sorted_rows(frame, NEWEST, True)["run_id"].tolist() == [b, a, c]  # missing last
    assert run_columns.sorted_rows(frame, BEST, True)["run_id"].tolist() == [a, b, c]
    assert run_columns.sorted_rows(frame, NEWEST, False)["run_id"].tolist() == [a, b, c]  # missing last both ways


ALLOWED = {
    "status": Column("status", "status"),
    "last_val_acc": Column("last_val_acc", "last val acc"),
    NEWEST: Column(NEWEST, "MATH500 pass@1 (newest ckpt)", kind="eval", name="MATH500", metric="pass@1", at="newest"),
    "config:model path": Column("config:model path", "config.model path", kind="config", name="model path"),
    "run_id": Column("run_id", "run_id"),
}


def test_the_url_choice_is_allow_listed_and_round_trips() -> None:
    params = {
        "col": ["status", "eval:math500:pass@1:newest", "eval:GSM8K:pass@1:newest", "status"],
        "sort": ["config:model path"],
        "order": ["asc"],
        "filter": ["last_val_acc >= 0.5", "config:model path contains Qwen", "nope > 1", "status is empty",
                   "status >= ", "run_id contains x"],
    }  # fmt: skip
    choice, dropped = run_columns.from_url(params, ALLOWED, ["status"], fixed=["run_id"])
    assert dropped == ["column eval:GSM8K:pass@1:newest", "filter nope > 1", "filter status >= "]
    assert choice.columns == ("status", NEWEST, "config:model path", "last_val_acc")  # sort, filters join (no run_id)
    assert choice.sort == "config:model path" and not choice.descending
    assert choice.filters == (
        Filter("last_val_acc", ">=", "0.5"),
        Filter("config:model path", "contains", "Qwen"),  # a key holding a space
        Filter("status", "is empty"),
        Filter("run_id", "contains", "x"),
    )
    again, none = run_columns.from_url(run_columns.url_params(choice, ["status"]), ALLOWED, ["status"], ["run_id"])
    assert (again, none) == (choice, [])
    assert run_columns.url_params(Choice(("status",)), ["status"]) == {}  # the defaults keep the URL short
    assert run_columns.url_params(Choice(()), ["status"]) == {"col": ""}  # none: col= (not the defaults)
    assert run_columns.from_url({"col": [""]}, ALLOWED, ["status"])[0].columns == ()
    assert run_columns.from_url({"order": ["up"]}, ALLOWED, [])[1] == ["order up"]


def test_filters_compare_numbers_match_text_and_find_empty_cells() -> None:
    frame = pd.DataFrame(
        {"x": [0.2, 0.5, None, 0.9], "t": ["Qwen3-8B", "llama", None, ""], "n": [1, 2, 3, 4]}, index=[7, 8, 9, 10]
    )

    def kept(*filters: Filter) -> list[int]:
        return frame.index[run_columns.matching(frame, filters)].tolist()

    assert kept(Filter("x", ">=", "0.5")) == [8, 10]
    assert kept(Filter("x", "<", "0.5")) == [7]  # a missing value never meets a threshold
    assert kept(Filter("x", "!=", "0.5")) == [7, 10]
    assert kept(Filter("x", "=", "0.2")) == [7]
    assert kept(Filter("t", "contains", "qwen")) == [7]  # any case
    assert kept(Filter("t", "=", "llama")) == [8] and kept(Filter("t", "!=", "llama")) == [7]
    assert kept(Filter("t", "is empty")) == [9, 10] and kept(Filter("x", "is not empty")) == [7, 8, 10]
    assert kept(Filter("x", ">", "0.1"), Filter("t", "contains", "l")) == [8]  # every filter holds
    assert run_columns.filter_problem(Filter("x", ">=", "abc"), frame["x"]) == "abc is not a number"
    assert run_columns.filter_problem(Filter("x", ">=", "nan"), frame["x"]) == "nan is not a finite number"
    assert run_columns.filter_problem(Filter("x", "contains", "1"), frame["x"]) == "contains needs a text column"
    assert run_columns.filter_problem(Filter("t", ">", "1"), frame["t"]) == "> needs a number column"
    assert run_columns.filter_problem(Filter("n", "<=", "3"), frame["n"]) is None


def _newest_math500(db: Path) -> dict[str, float]:
    """Each run's MATH500 pass@1 (math_verify) at its highest evaluated step, read with DuckDB directly."""
    with duckdb.connect(str(db), read_only=True) as con:
        return dict(
            con.execute(
                """SELECT run_id, arg_max(value, step) FROM eval_metrics WHERE benchmark = 'MATH500'
                AND checker = 'math_verify' AND metric = 'pass@1' AND step IS NOT NULL GROUP BY run_id"""
            ).fetchall()
        )


def test_the_page_adds_sorts_and_filters_a_benchmark_column_from_the_url(app: AppTest, synthetic_store: Path) -> None:
    render(app, "views/runs.py", col=["status", NEWEST], sort=NEWEST, order="desc", filter=f"{NEWEST} >= 0.5")
    rows = app.dataframe[-1].value
    assert list(rows.columns) == ["open", "run_id", NEWEST, "status"]  # the added column beside the run id
    scores = _newest_math500(synthetic_store)
    expected = sorted((r for r in scores if scores[r] >= 0.5), key=scores.__getitem__, reverse=True)
    assert len(expected) >= 5 and len(expected) < len(scores)  # the threshold keeps some runs and drops others
    assert rows["run_id"].tolist() == expected
    assert rows[NEWEST].tolist() == [scores[r] for r in expected]
    assert app.dataframe[-1].proto.placeholder == ABSENT  # a missing value is drawn as a dash, never "None"
    assert app.selectbox(key="run_sort").value == NEWEST and app.radio(key="run_order").value == "descending"
    assert [f.text() for f in app.multiselect(key="run_filters").value] == [f"{NEWEST} >= 0.5"]
    assert not [w for w in app.warning if "Left out" in w.value]
    app.run()  # a reload of the same address
    assert app.dataframe[-1].value["run_id"].tolist() == expected


def test_an_unknown_column_is_left_out_with_a_note_and_the_rest_kept(app: AppTest) -> None:
    render(app, "views/runs.py", col=["status", "eval:NoSuchBench:pass@1:newest", "config:x*y"], sort="nope")
    (note,) = [w.value for w in app.warning if "Left out" in w.value]
    assert "column eval\\:NoSuchBench\\:pass@1\\:newest" in note and "column config\\:x\\*y" in note  # escaped
    assert "sort nope" in note
    assert list(app.dataframe[-1].value.columns) == ["open", "run_id", "status"] and len(app.dataframe[-1].value) == 12
    assert app.query_params == {"col": "status"}  # the address no longer names what the store lacks


def test_picking_columns_sort_and_a_filter_writes_the_url_and_a_reload_keeps_it(
    app: AppTest, synthetic_store: Path
) -> None:
    render(app, "views/runs.py")
    assert app.multiselect(key="run_columns").value[:2] == ["seed_index", "status"]  # the table's own columns
    app.multiselect(key="run_columns").set_value(["status", BEST, "config:method.name"]).run()
    assert app.query_params == {"col": ["status", BEST, "config:method.name"]}
    app.selectbox(key="run_sort").set_value(BEST).run()
    app.radio(key="run_order").set_value("ascending").run()
    assert app.query_params["sort"] == BEST and app.query_params["order"] == "asc"
    app.selectbox(key="new_filter_column").set_value("config:method.name")
    app.selectbox(key="new_filter_op").set_value("contains")
    app.text_input(key="new_filter_value").input("CO_REWARDING")
    app.button(key="add_filter_button").click().run()
    assert app.query_params["filter"] == "config:method.name contains CO_REWARDING"
    app.run()  # a reload
    rows = app.dataframe[-1].value
    with duckdb.connect(str(synthetic_store), read_only=True) as con:
        best = dict(
            con.execute(
                """SELECT e.run_id, max(e.value) FROM eval_metrics e JOIN runs r USING (run_id)
                WHERE e.benchmark = 'MATH500' AND e.checker = 'math_verify' AND e.metric = 'pass@1'
                AND e.step IS NOT NULL AND r.method LIKE 'co_rewarding%' GROUP BY e.run_id"""
            ).fetchall()
        )
        methods = con.execute("SELECT run_id, method FROM runs ORDER BY started_at DESC NULLS LAST, run_id").fetchall()
    mine = [r for r, m in methods if m.startswith("co_rewarding")]  # in the table's default order
    assert rows["run_id"].tolist() == sorted(best, key=best.__getitem__) + [r for r in mine if r not in best]
    assert rows["config:method.name"].str.startswith("co_rewarding").all() and len(rows) == len(mine)
    app.multiselect(key="run_filters").set_value([]).run()  # the filter's chip removed
    assert "filter" not in app.query_params and len(app.dataframe[-1].value) == 12
    app.multiselect(key="run_columns").set_value(["status"]).run()  # the sort column removed: so is the sort
    assert app.query_params == {"col": "status"}


def test_a_filter_that_does_not_fit_its_column_is_left_out(app: AppTest) -> None:
    render(app, "views/runs.py", filter=["status > 3", "last_val_acc >= abc", "last_val_acc >= 0.2"])
    (note,) = [w.value for w in app.warning if "Left out" in w.value]
    assert "\\> needs a number column" in note and "abc is not a number" in note
    assert [f.text() for f in app.multiselect(key="run_filters").value] == ["last_val_acc >= 0.2"]
    assert app.query_params["filter"] == "last_val_acc >= 0.2"


def test_a_hostile_config_key_and_value_show_as_text(
    columns_store: tuple[Path, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    db, ids = columns_store
    rlo, marked = "\u202e", "**bold** [x](javascript:alert(1))"
    with duckdb.connect(str(db)) as con:  # written into the store directly: what a run's config.yaml could hold
        con.execute("UPDATE runs SET config = ? WHERE run_id = ?", [json.dumps({f"k{rlo}": marked}), ids["a"]])
    monkeypatch.setenv("COREWARDING_RESULTS_DB", str(db))
    key = f"config:k{rlo}"
    app = render(AppTest.from_file(APP, default_timeout=60), "views/runs.py", col=key, filter=f"{key} contains bold")
    rows = app.dataframe[-1].value
    assert rows["config:k<U+202E>"].tolist() == [marked]  # the value as typed, its key's U+202E made visible
    assert "config.k<U+202E>" in app.multiselect(key="run_columns").options
    assert [str(f) for f in app.multiselect(key="run_filters").options] == ["config.k<U+202E> contains bold"]
    headers = json.loads(app.dataframe[-1].proto.columns)  # the column config the browser gets: ids and labels
    assert headers["config:k<U+202E>"]["label"] == "config.k<U+202E>" and rlo not in app.dataframe[-1].proto.columns
