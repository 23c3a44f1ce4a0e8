"""Ingestion into the results store: exact rows from hand-written run folders, idempotence, replacement, errors."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from corewarding.results.ingest.evaluation import EvalFileError
from corewarding.results.ingest.ingestion import ingest
from corewarding.results.ingest.quality import QualityReportError
from corewarding.results.ingest.released import AuditRecordError
from corewarding.results.ingest.run_folders import RunFolderError
from corewarding.results.store import store

CONFIG = """backend: local
method: {name: majority_voting}
base_model: {name: qwen3-4b-base}
dataset: {name: math}
grpo: {max_response_length: 3072}
schedule: {total_steps: 2}
"""


def write_run(run_dir: Path, lines: list[str], record: dict[str, object] | None = None, last: int | None = 2) -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.yaml").write_text(CONFIG)
    (run_dir / "metrics.jsonl").write_text("".join(lines))
    if last is not None:
        (run_dir / "checkpoints" / f"global_step_{last}").mkdir(parents=True)
        state = {"step": last, "total_steps": 2, "config_hash": "abc"}
        (run_dir / "checkpoints" / f"global_step_{last}" / "trainer_state.json").write_text(json.dumps(state))
        (run_dir / "checkpoints" / "latest").write_text(f"global_step_{last}")
    if record is not None:
        (run_dir / "run.json").write_text(json.dumps(record))
    return run_dir


LINES = [
    '{"step": 0, "val_accuracy": 0.25}\n',
    '{"step": 1, "reward_mean": 0.5, "label_accuracy": 0.4, "ema_rate": null, "grad_norm": 12.5}\n',
    '{"step": 2, "reward_mean": 0.75, "label_accuracy": 0.3, "val_accuracy": 0.5}\n',
]


def rows(db: Path, sql: str, params: list[object] | None = None) -> list[tuple[object, ...]]:
    with store.reader(db) as con:
        return con.execute(sql, params or []).fetchall()


def test_a_run_folder_becomes_exact_rows(tmp_path: Path) -> None:
    run = write_run(tmp_path / "runs" / "r1", LINES)
    db = tmp_path / "r.duckdb"
    summary = ingest(db, [tmp_path / "runs"])
    assert summary.rows["training_metrics"] == 7  # nulls are not values; step is the key, not a metric
    got = rows(db, "SELECT metric, step, value FROM training_metrics ORDER BY metric, step")
    assert got == [
        ("grad_norm", 1, 12.5),
        ("label_accuracy", 1, 0.4),
        ("label_accuracy", 2, 0.3),
        ("reward_mean", 1, 0.5),
        ("reward_mean", 2, 0.75),
        ("val_accuracy", 0, 0.25),
        ("val_accuracy", 2, 0.5),
    ]
    (run_row,) = rows(
        db,
        "SELECT cell_id, method, base_model, dataset, status, last_step, total_steps, "
        "config_hash, hub_repo_id, max_response_length, run_id FROM runs",
    )
    assert run_row[:10] == (
        "majority_voting__qwen3-4b-base__math",
        "majority_voting",
        "qwen3-4b-base",
        "math",
        "finished",
        2,
        2,
        "abc",
        "TMLR-Group-HF/Majority-Voting-Qwen3-4B-Base-MATH",
        3072,
    )
    assert str(run_row[10]).startswith("majority_voting__qwen3-4b-base__math@")
    assert rows(db, "SELECT count(*) FROM paper_results") == [(609,)]
    assert rows(db, "SELECT metric FROM paper_results WHERE benchmark = 'AMC' LIMIT 1") == [("avg@8",)]
    assert run.is_dir()


def test_ingesting_twice_adds_nothing_and_a_grown_file_replaces_its_rows(tmp_path: Path) -> None:
    run = write_run(
        tmp_path / "runs" / "r1", LINES[:2], record={"status": "running", "started_at": "2026-11-01T10:00:00Z"}
    )
    db = tmp_path / "r.duckdb"
    ingest(db, [tmp_path / "runs"])
    before = rows(db, "SELECT * FROM training_metrics ORDER BY ALL")
    again = ingest(db, [tmp_path / "runs"])
    assert again.rows == {} and again.changed == [] and again.unchanged == 1
    assert rows(db, "SELECT * FROM training_metrics ORDER BY ALL") == before
    (run / "metrics.jsonl").write_text("".join(LINES))
    grown = ingest(db, [tmp_path / "runs"])
    assert grown.rows == {"training_metrics": 7}
    assert rows(db, "SELECT count(*), count(DISTINCT (metric, step)) FROM training_metrics") == [(7, 7)]
    assert rows(db, "SELECT status, started_at FROM runs")[0][0] == "running"


def test_an_unfinished_last_line_of_a_running_run_waits_for_the_next_ingest(tmp_path: Path) -> None:
    write_run(tmp_path / "runs" / "r1", [*LINES[:2], '{"step": 2, "rew'], record={"status": "running"}, last=None)
    db = tmp_path / "r.duckdb"
    ingest(db, [tmp_path / "runs"])
    assert rows(db, "SELECT max(step) FROM training_metrics") == [(1,)]


def test_bad_metrics_lines_name_file_line_and_key(tmp_path: Path) -> None:
    run = write_run(tmp_path / "runs" / "r1", [LINES[0], '{"step": 1, "reward_mean": "high"}\n'])
    with pytest.raises(RunFolderError, match=r"metrics.jsonl:2: reward_mean='high' is not a number"):
        ingest(tmp_path / "r.duckdb", [tmp_path / "runs"])
    (run / "metrics.jsonl").write_text(LINES[0] + "{not json\n" + LINES[1])
    with pytest.raises(RunFolderError, match=r"metrics.jsonl:2: not JSON"):
        ingest(tmp_path / "r.duckdb", [tmp_path / "runs"])
    (run / "metrics.jsonl").write_text(LINES[1] + LINES[1])
    with pytest.raises(RunFolderError, match=r"metrics.jsonl:2: step 1 appears twice"):
        ingest(tmp_path / "r.duckdb", [tmp_path / "runs"])


def test_status_and_times_are_inferred_without_run_json(tmp_path: Path) -> None:
    write_run(tmp_path / "runs" / "done", LINES)
    write_run(tmp_path / "runs" / "half", LINES[:2], last=1)
    db = tmp_path / "r.duckdb"
    ingest(db, [tmp_path / "runs"])
    got = dict(rows(db, "SELECT split_part(run_dir, '/', -1), status FROM runs"))
    assert got == {"done": "finished", "half": "incomplete"}
    assert rows(db, "SELECT count(*) FROM runs WHERE started_at IS NULL") == [(0,)]


def eval_frame(**overrides: object) -> pd.DataFrame:
    frame = pd.DataFrame(
        {
            "step": pd.array([None, 10, 20], dtype="Int64"),
            "benchmark": "MATH500",
            "checker": "strict",
            "metric": "pass@1",
            "value": [0.5, 0.7, 0.6],
            "ci_low": 0.4,
            "ci_high": 0.8,
            "n": 1,
            "num_problems": 500,
            "temperature": 0.8,
            "seed": 0,
            "model_revision": "abc",
            "extra_column": "ignored",
        }
    )
    for key, value in overrides.items():
        frame[key] = value
    return frame


def test_eval_files_are_checked_and_a_failure_keeps_the_previous_rows(tmp_path: Path) -> None:
    run = write_run(tmp_path / "runs" / "r1", LINES)
    (run / "eval").mkdir()
    eval_frame().to_parquet(run / "eval" / "metrics.parquet")
    db = tmp_path / "r.duckdb"
    ingest(db, [tmp_path / "runs"])
    assert rows(db, "SELECT step, benchmark_key, value FROM eval_metrics ORDER BY step NULLS FIRST") == [
        (None, "math500", 0.5),
        (10, "math500", 0.7),
        (20, "math500", 0.6),
    ]
    eval_frame(checker=["strict", "strict", "lenient"]).to_parquet(run / "eval" / "metrics.parquet")
    with pytest.raises(EvalFileError, match=r"metrics.parquet: row 3: checker must be one of strict, math_verify"):
        ingest(db, [tmp_path / "runs"])
    eval_frame(value=[0.5, 70.0, 0.6]).to_parquet(run / "eval" / "metrics.parquet")
    with pytest.raises(EvalFileError, match=r"row 2: pass@k / avg@k / maj@k values must be fractions"):
        ingest(db, [tmp_path / "runs"])
    eval_frame().drop(columns=["metric"]).to_parquet(run / "eval" / "metrics.parquet")
    with pytest.raises(EvalFileError, match=r"metrics.parquet: missing column\(s\) metric"):
        ingest(db, [tmp_path / "runs"])
    assert rows(db, "SELECT count(*) FROM eval_metrics") == [(3,)]  # the failed ingests rolled back


def test_a_score_per_settings_key_is_kept_and_a_repeat_under_one_key_refused(tmp_path: Path) -> None:
    run = write_run(tmp_path / "runs" / "r1", LINES)
    (run / "eval").mkdir()
    twice = eval_frame(step=pd.array([20, 20, 20], dtype="Int64"), settings_key=["seed0", "seed1", "seed0"])
    twice.to_parquet(run / "eval" / "metrics.parquet")
    db = tmp_path / "r.duckdb"
    with pytest.raises(
        EvalFileError, match=r"checker/metric/settings_key \(20, 'MATH500', 'strict', 'pass@1', 'seed0'\)"
    ):
        ingest(db, [tmp_path / "runs"])
    twice.iloc[:2].to_parquet(run / "eval" / "metrics.parquet")
    ingest(db, [tmp_path / "runs"])
    assert rows(db, "SELECT settings_key, value, source FROM eval_metrics ORDER BY ALL") == [
        ("seed0", 0.5, "reproduced"),
        ("seed1", 0.7, "reproduced"),
    ]


def test_samples_are_ingested_and_duplicates_refused(tmp_path: Path) -> None:
    run = write_run(tmp_path / "runs" / "r1", LINES)
    (run / "eval").mkdir()
    samples = pd.DataFrame(
        {
            "step": 20,
            "benchmark": "AMC",
            "problem_id": [7, 7, 8],
            "sample_index": [0, 1, 0],
            "response": ["\\boxed{1}", "\\boxed{2}", "..."],
            "extracted_answer": ["1", "2", None],
            "correct_strict": [True, False, False],
            "correct_math_verify": [True, False, False],
            "length": [5, 5, 3072],
            "truncated": [False, False, True],
        }
    )
    samples.to_parquet(run / "eval" / "samples.parquet")
    db = tmp_path / "r.duckdb"
    assert ingest(db, [tmp_path / "runs"]).rows["eval_samples"] == 3
    assert rows(db, "SELECT problem_id, sample_index, truncated FROM eval_samples ORDER BY ALL") == [
        ("7", 0, False),
        ("7", 1, False),
        ("8", 0, True),
    ]
    samples.assign(sample_index=[0, 0, 0]).to_parquet(run / "eval" / "samples.parquet")
    with pytest.raises(
        EvalFileError, match=r"samples.parquet: step/benchmark/problem_id/sample_index/settings_key .* appears 2"
    ):
        ingest(db, [tmp_path / "runs"])
    # the same sample under two settings (an audit's second seed) is two samples, not a duplicate
    samples.assign(sample_index=[0, 0, 0], settings_key=["a", "b", "a"]).to_parquet(run / "eval" / "samples.parquet")
    assert ingest(db, [tmp_path / "runs"]).rows["eval_samples"] == 3


def test_a_file_gone_from_a_run_takes_its_rows_and_hidden_folders_are_not_runs(tmp_path: Path) -> None:
    run = write_run(tmp_path / "runs" / "r1", LINES)
    (run / "eval").mkdir()
    pd.DataFrame({"step": [2], "benchmark": ["AMC"], "problem_id": [1], "sample_index": [0], "response": ["x"],
                  "extracted_answer": ["1"], "correct_strict": [True], "correct_math_verify": [True], "length": [1],
                  "truncated": [False]}).to_parquet(run / "eval" / "samples.parquet")  # fmt: skip
    write_run(tmp_path / "runs" / ".superseded" / "r1-old", LINES)  # a run moved aside: not ingested
    db = tmp_path / "r.duckdb"
    ingest(db, [tmp_path / "runs"])
    assert rows(db, "SELECT count(*) FROM eval_samples") == [(1,)] and rows(db, "SELECT count(*) FROM runs") == [(1,)]
    (run / "eval" / "samples.parquet").unlink()  # e.g. the run was trained again and not yet evaluated
    summary = ingest(db, [tmp_path / "runs"])
    assert rows(db, "SELECT count(*) FROM eval_samples") == [(0,)] and summary.changed == [
        str(run / "eval/samples.parquet")
    ]
    assert rows(db, "SELECT count(*) FROM training_metrics WHERE step = 2") == [(3,)]  # its other files stay
    assert ingest(db, [tmp_path / "runs"]).changed == []


def report(**overrides: object) -> dict[str, object]:
    base: dict[str, object] = {
        "dataset": "math",
        "stage": "rephrase",
        "split": "train",
        "source": "x",
        "output": "y",
        "rows_in": 10,
        "rows_out": 8,
        "dropped": {"no_answer": 2},
        "dropped_rows": [
            {"row": {"q": "a"}, "index": 3, "reason": "no_answer", "detail": None},
            {"row": 5, "index": 5, "reason": "no_answer", "detail": {"why": "empty"}},
        ],
        "rejected": {"leak": 1},
        "rejected_rows": [
            {
                "row": {"q": "b"},
                "index": 1,
                "reason": "leak",
                "attempts": 3,
                "action": "kept_original",
                "detail": "states 42",
            }
        ],
        "flagged": {"duplicate": 1, "prompt_too_long": 0},
        "flagged_rows": [{"row": 7, "index": "q-7", "reason": "duplicate", "detail": "seen in row 2"}],
        "counts": {"level": {"1": 4, "2": 4}},
        # keys the data stage writes that ingestion keeps only in the stored JSON
        "dropped_total": 2,
        "prompt_tokens": {"checked": False},
        "on_failure": "keep_original",
        "rejections_per_attempt": {"leak": 3},
    }
    return {**base, **overrides}


def test_quality_reports_become_rows_and_a_malformed_one_names_the_file(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "math").mkdir(parents=True)
    (data / "math" / "train.quality.json").write_text(json.dumps(report()))
    db = tmp_path / "r.duckdb"
    ingest(db, data_dirs=[data])
    assert rows(
        db,
        "SELECT dataset, stage, rows_in, rows_out, dropped_total, rejected_total, flagged_total FROM quality_reports",
    ) == [("math", "rephrase", 10, 8, 2, 1, 1)]
    assert rows(
        db, "SELECT kind, position, row_index, reason, attempts, action, detail FROM quality_rows ORDER BY ALL"
    ) == [
        ("dropped", 0, "3", "no_answer", None, None, None),
        ("dropped", 1, "5", "no_answer", None, None, '{"why": "empty"}'),
        ("flagged", 0, "q-7", "duplicate", None, None, "seen in row 2"),
        ("rejected", 0, "1", "leak", 3, "kept_original", "states 42"),
    ]
    assert rows(db, "SELECT kind, reason, count FROM quality_reasons ORDER BY ALL") == [
        ("dropped", "no_answer", 2),
        ("flagged", "duplicate", 1),
        ("flagged", "prompt_too_long", 0),
        ("rejected", "leak", 1),
    ]
    assert json.loads(rows(db, "SELECT report FROM quality_reports")[0][0])["on_failure"] == "keep_original"
    assert rows(db, "SELECT count(*) FROM quality_counts") == [(2,)]
    assert ingest(db, data_dirs=[data]).rows == {}
    bad = data / "openrs" / "train.quality.json"
    bad.parent.mkdir()
    bad.write_text(json.dumps(report(rows_out="eight")))
    with pytest.raises(QualityReportError, match=rf"{bad}: rows_out must be a non-negative integer"):
        ingest(db, data_dirs=[data])
    bad.write_text("{")
    with pytest.raises(QualityReportError, match=rf"{bad}: not a readable JSON file"):
        ingest(db, data_dirs=[data])
    bad.write_text(json.dumps(report(flagged_rows=[{"index": 1.5, "reason": "x"}])))
    with pytest.raises(QualityReportError, match=r"flagged_rows\[0\].index must be an integer or a string"):
        ingest(db, data_dirs=[data])
    del_key = report()
    del del_key["dropped"]
    bad.write_text(json.dumps(del_key))
    with pytest.raises(QualityReportError, match=r"missing key\(s\) dropped"):
        ingest(db, data_dirs=[data])
    assert rows(db, "SELECT count(*) FROM quality_reports") == [(1,)]


def test_the_reader_cannot_write_and_a_missing_store_is_explained(tmp_path: Path) -> None:
    db = tmp_path / "r.duckdb"
    ingest(db)
    with store.reader(db) as con, pytest.raises(duckdb.Error, match="read-only"):
        con.execute("DELETE FROM paper_results")
    with pytest.raises(FileNotFoundError, match="corewarding results ingest"), store.reader(tmp_path / "none.duckdb"):
        pass


def test_an_audit_record_naming_another_repository_is_not_ingested(tmp_path: Path) -> None:
    """A tampered ``released/audit.json`` may not credit its scores to a repository the matrix does not name for
    the cell: the ingest names the file and both repositories, and writes nothing."""
    cell = "gt_grpo__qwen3-4b-base__math"
    folder = tmp_path / "runs" / cell / "released"
    folder.mkdir(parents=True)
    record = {"cell_id": cell, "method": "gt_grpo", "base_model": "qwen3-4b-base", "dataset": "math",
              "hub_repo_id": "attacker/Other-Model", "revision": "f" * 40, "status": "done"}  # fmt: skip
    (folder / "audit.json").write_text(json.dumps(record))
    with pytest.raises(AuditRecordError) as refused:
        ingest(tmp_path / "results.duckdb", runs_roots=[tmp_path / "runs"])
    assert str(refused.value) == (
        f"{folder / 'audit.json'}: names attacker/Other-Model, the matrix names TMLR-Group-HF/GT-Qwen3-4B-Base-MATH "
        f"for {cell}; audit it again (corewarding audit)"
    )
    assert not (tmp_path / "results.duckdb").exists()
