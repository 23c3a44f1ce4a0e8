"""The dashboard's queries on generated stores: values checked by hand."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import duckdb
import pytest

from corewarding.results.store import store
from dashboard import queries


def test_paper_comparison_takes_the_newest_run_and_the_chosen_checkpoint(hand_store: Path) -> None:
    with store.reader(hand_store) as con:
        latest = queries.paper_comparison(con, "Table 1", "math_verify", "latest")
        best = queries.paper_comparison(con, "Table 1", "math_verify", "best")
        strict = queries.paper_comparison(con, "Table 1", "strict", "latest")
    assert len(latest) == 147  # every cell of Table 1, measured or not
    mine = latest[(latest["model"] == "Qwen3-8B-Base") & (latest["method"] == "majority_voting")].set_index("benchmark")
    # the paper: 79.8 on MATH500 and 49.09 (avg@8) on AMC; the newer run's step 30 holds 0.82 and avg@8 0.50
    assert mine.loc["MATH500", ["paper", "measured", "difference", "checkpoint_step"]].tolist() == [
        79.8,
        82.0,
        2.2,
        "30",
    ]
    assert mine.loc["AMC", ["metric", "measured", "difference"]].tolist() == ["avg@8", 50.0, 0.91]
    assert mine.loc["GSM8K"].isna()["measured"]
    assert str(mine.loc["MATH500", "run_id"]).startswith("majority_voting__qwen3-8b-base__math@")
    best_row = best[
        (best["method"] == "majority_voting") & (best["model"] == "Qwen3-8B-Base") & (best["benchmark"] == "MATH500")
    ]
    assert best_row[["measured", "checkpoint_step"]].values.tolist() == [[85.0, "20"]]  # not the old run's 0.9
    base = latest[
        (latest["method"] == "base") & (latest["model"] == "Qwen3-8B-Base") & (latest["benchmark"] == "MATH500")
    ]
    assert base[["paper", "measured", "difference", "checkpoint_step"]].values.tolist() == [
        [72.4, 70.0, -2.4, "base model"]
    ]
    assert strict[
        (strict["method"] == "majority_voting")
        & (strict["model"] == "Qwen3-8B-Base")
        & (strict["benchmark"] == "MATH500")
    ]["measured"].tolist() == [60.0]
    suspect = latest[latest["suspect"]]
    assert set(suspect["benchmark"]) == {"IFEval"} and len(suspect) == 2
    with pytest.raises(ValueError, match="latest or best"):
        queries.paper_comparison(con, "Table 1", "strict", "max")


def test_training_queries(hand_store: Path) -> None:
    with store.reader(hand_store) as con:
        runs = queries.runs(con)
        new = runs["run_id"][0]  # newest first
        by_run = queries.training_metric_by_run(con, "reward_mean").set_index("run_id")
        curves = queries.training_curves(con, [new], ["val_accuracy"])
        old_curves = queries.training_curves(con, [runs["run_id"][1]], ["reward_mean"])
        inputs = queries.collapse_inputs(con, [new])
        everything = queries.collapse_inputs(con)
        latest = queries.latest_runs(con)
    assert runs["started_at"].dt.month.tolist() == [2, 1]
    assert by_run.loc[new, ["step", "last", "peak"]].tolist() == [4, 0.8, 0.9]
    assert curves[["step", "value", "wall_hours"]].values.tolist() == [[0, 0.3, 0.0], [2, 0.6, 1.0], [4, 0.2, 2.5]]
    assert old_curves["wall_hours"].isna().all()  # a run that logs no step_seconds has no wall time
    assert set(inputs["metric"]) == {"val_accuracy", "reward_mean", "response_length_mean"}
    assert (inputs["cap"] == 100).all() and len(everything) == len(inputs) + 1
    assert latest["run_id"].tolist() == [new]  # one run per cell: the newest
    assert latest[["published_step", "published_commit"]].isna().all(axis=None)  # no publish record


def test_sample_queries_filter_and_page(hand_store: Path) -> None:
    amc = queries.SampleFilter(benchmarks=("AMC",))
    with store.reader(hand_store) as con:
        run_id = queries.sample_index(con)["run_id"][0]
        summary = queries.sample_summary(con, run_id, 30).set_index("benchmark")
        all_rows = queries.samples(con, run_id, 30)
        wrong_strict = queries.samples(con, run_id, 30, replace(amc, strict=False))
        wrong_mv = queries.sample_count(con, run_id, 30, replace(amc, math_verify=False))
        rescued = queries.samples(con, run_id, 30, queries.SampleFilter(strict=False, math_verify=True))
        disagree = queries.samples(con, run_id, 30, queries.SampleFilter(disagree=True))
        agree = queries.sample_count(con, run_id, 30, queries.SampleFilter(disagree=False))
        cut = queries.samples(con, run_id, 30, queries.SampleFilter(truncated=True))
        page2 = queries.samples(con, run_id, 30, limit=4, offset=4)
        full = queries.sample_detail(con, run_id, 30, "AMC", "p1", 0)
        none_at_base = queries.sample_count(con, run_id, None)
    assert summary.loc["AMC", ["samples", "problems", "acc_strict", "acc_math_verify", "truncated"]].tolist() == [
        4,
        2,
        0.5,
        0.75,
        0.25,
    ]
    assert len(all_rows) == 6
    assert wrong_strict[["problem_id", "sample_index", "question", "gold"]].values.tolist() == [
        ["p1", 1, "What is 1+2?", "3"],
        ["p2", 0, "Q2", "5"],
    ]
    assert wrong_mv == 1
    assert rescued[["problem_id", "sample_index"]].values.tolist() == [["p1", 1], ["q", 1]]
    assert disagree.equals(rescued) and agree == 4
    assert cut["problem_id"].tolist() == ["p2"]
    assert page2[["benchmark", "problem_id"]].values.tolist() == [["MATH500", "q"], ["MATH500", "q"]]
    assert all_rows["response"][0].startswith("…") and all_rows["response"][0].endswith("\\boxed{3}")
    assert len(all_rows["response"][0]) == 401 and all_rows["question"][4] == "x" * 120 + "…"
    assert full == {"question": "What is 1+2?", "gold": "3", "response": "x" * 500 + "\\boxed{3}"}
    assert none_at_base == 0


def test_queries_on_the_synthetic_store(synthetic_store: Path) -> None:
    with store.reader(synthetic_store) as con:
        overview = queries.overview(con).set_index("table_name")["rows"]
        choices = queries.eval_choices(con)
        by_run = queries.eval_metric_by_run(con, "MATH500", "strict", "pass@1")
        reports = queries.quality_reports(con)
        first = reports["report_id"][0]
        reasons = queries.quality_reasons(con, first)
        dropped = queries.quality_rows(con, first, "dropped")
        counts = queries.quality_counts(con, first)
        tables = queries.paper_tables(con)
    assert overview["runs"] == 12 and overview["paper_results"] == 609
    assert overview["eval_samples"] == 10 * 7 * 16  # 10 finished runs x 7 benchmarks x 16 samples
    assert len(choices) == 7 * 2 * 4 and len(by_run) == 10 and (by_run["step"] == 30).all()
    assert reports["stage"].tolist() == ["prepare", "rephrase"] and (reports["unexplained"] == 0).all()
    dropped_reasons = reasons[reasons["kind"] == "dropped"]
    by_reason = dict(zip(dropped_reasons["reason"], dropped_reasons["count"], strict=True))
    assert sum(by_reason.values()) == reports["dropped_total"][0]
    assert len(dropped) == by_reason["no_boxed_answer"] and set(dropped["reason"]) == {"no_boxed_answer"}
    assert counts["count"].sum() == 7500
    assert tables == ["Table 1", "Table 2", "Table 3", "Table 7", "Table 8"]


def test_the_dashboard_connection_reaches_no_file_but_the_store(hand_store: Path, tmp_path: Path) -> None:
    """The dashboard reads through store.reader only (test_pages checks); its SQL can neither write nor read files."""
    written = tmp_path / "out.csv"
    secret = tmp_path / "secret.csv"
    secret.write_text("a,b\n1,2\n")
    with store.reader(hand_store) as con:
        with pytest.raises(duckdb.PermissionException):
            con.execute(f"COPY runs TO '{written}' (HEADER)")
        with pytest.raises(duckdb.PermissionException):
            con.execute(f"SELECT * FROM read_csv('{secret}')").fetchall()
        with pytest.raises(duckdb.PermissionException):
            con.execute(f"ATTACH '{tmp_path / 'other.duckdb'}' AS other")
        with pytest.raises(duckdb.InvalidInputException, match="locked"):
            con.execute("SET enable_external_access = true")
        with pytest.raises(duckdb.PermissionException):  # still refused after the attempt
            con.execute(f"SELECT * FROM read_csv('{secret}')").fetchall()
        runs = queries.runs(con)
        curves = queries.training_curves(con, list(runs["run_id"]), ["reward_mean"])
    assert not written.exists() and not (tmp_path / "other.duckdb").exists()
    assert len(runs) == 2 and len(curves) == 5  # the queries still read the store (4 + 1 reward_mean rows)
