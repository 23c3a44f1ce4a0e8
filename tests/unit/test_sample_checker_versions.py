"""Every stored sample says which checker code gave its verdicts, so a claim can refuse to pool two versions.

Two evaluations of one run (steps 10 and 20) are scored by the real harness under two versions of the checkers' code;
after ingestion each sample row carries its own evaluation's versions (those its metric rows record), a samples file
written before the versions were kept gets them from its unit's metric rows, and a store from before (v7) keeps its
rows with NULL: unknown.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from corewarding.evaluation import provenance
from corewarding.evaluation.eval_config import benchmark_configs
from corewarding.evaluation.harness import evaluate_targets
from corewarding.evaluation.targets import Target
from corewarding.files import write_parquet_atomic
from corewarding.matrix import Cell
from corewarding.results import synthetic
from corewarding.results.checker_versions import sample_checker_versions
from corewarding.results.ingest.ingestion import ingest
from corewarding.results.store import schema, store
from corewarding.rows import make_row
from tests.support.old_store import store_at_version
from tests.unit.evaluation.test_harness_metrics import GOLDS, ScriptedGenerator
from tests.unit.test_results_ingest import LINES, write_run

CHECKERS = ("strict", "math_verify")
Versions = dict[str, str]


def _evaluate(monkeypatch: pytest.MonkeyPatch, run: Path, data: Path, step: int, code: object) -> Versions:
    """Evaluate the run's checkpoint ``step`` with the checkers' code replaced by ``code``'s; its checker versions."""
    for checker in CHECKERS:
        monkeypatch.setitem(provenance.CHECKER_CODE, checker, (code,))
    configs = benchmark_configs(["math500"], [f"benchmark.data_file={data}", "benchmark.n=4", "math_verify.workers=1"])
    target = Target(step, "scripted", f"scripted@{step}")
    outcomes = evaluate_targets([target], configs, run, lambda cfg, path: ScriptedGenerator())
    assert [o.status for o in outcomes] == ["evaluated"]
    return {c: provenance.checker_version(c) for c in CHECKERS}


@pytest.fixture
def evaluated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> tuple[Path, dict[int, Versions]]:
    """A run folder evaluated at step 10 under one checker code and at step 20 under another."""
    data = tmp_path / "set.parquet"
    write_parquet_atomic([make_row(f"p{i}", gold, i, "test") for i, gold in enumerate(GOLDS)], data)
    run = write_run(tmp_path / "runs" / "r1", LINES)
    versions = {10: _evaluate(monkeypatch, run, data, 10, json), 20: _evaluate(monkeypatch, run, data, 20, csv)}
    assert versions[10]["math_verify"] != versions[20]["math_verify"]
    assert versions[10]["strict"] != versions[20]["strict"]
    return run, versions


def _stored(db: Path) -> tuple[str, list[tuple[object, ...]], set[tuple[object, ...]]]:
    """The run id; (step, strict version, math-verify version, samples) per group; (step, checker, version) scored."""
    with store.reader(db) as con:
        (run_id,) = con.execute("SELECT run_id FROM runs").fetchone() or ("",)
        samples = con.execute(
            "SELECT step, checker_version_strict, checker_version_math_verify, count(*) FROM eval_samples "
            "GROUP BY ALL ORDER BY ALL"
        ).fetchall()
        settings = con.execute("SELECT step, checker, settings FROM eval_metrics").fetchall()
    scored = {(step, checker, json.loads(s)["checker_version"] if s else None) for step, checker, s in settings}
    return str(run_id), samples, scored


def test_each_sample_carries_the_checker_versions_of_its_own_evaluation(
    evaluated: tuple[Path, dict[int, Versions]], tmp_path: Path
) -> None:
    run, versions = evaluated
    written = pq.read_table(run / "eval" / "samples.parquet").to_pylist()
    got = {(r["step"], r["checker_version_strict"], r["checker_version_math_verify"]) for r in written}
    assert got == {(step, v["strict"], v["math_verify"]) for step, v in versions.items()}  # the file says it too
    db = tmp_path / "r.duckdb"
    ingest(db, [tmp_path / "runs"])
    run_id, samples, scored = _stored(db)
    expected = [(step, v["strict"], v["math_verify"], 12) for step, v in sorted(versions.items())]
    assert samples == expected  # 3 problems x 4 samples per step, each under its own evaluation's code
    assert scored == {(step, c, v[c]) for step, v in versions.items() for c in CHECKERS}  # as its scores say
    with store.reader(db) as con:
        for checker in CHECKERS:
            both = {versions[10][checker], versions[20][checker]}
            assert sample_checker_versions(con, [run_id], "math500", checker) == both
            assert sample_checker_versions(con, [run_id], "MATH-500", checker) == both  # any spelling
        assert sample_checker_versions(con, [run_id], "gsm8k", "math_verify") == set()
        assert sample_checker_versions(con, ["other"], "math500", "math_verify") == set()
        with pytest.raises(ValueError, match="samples carry verdicts of strict, math_verify only"):
            sample_checker_versions(con, [run_id], "math500", "lm_eval")


def test_a_samples_file_without_versions_gets_them_from_its_units_scores(
    evaluated: tuple[Path, dict[int, Versions]], tmp_path: Path
) -> None:
    run, versions = evaluated
    samples_file = run / "eval" / "samples.parquet"
    table = pq.read_table(samples_file)
    pq.write_table(table.drop(["checker_version_strict", "checker_version_math_verify"]), samples_file)
    db = tmp_path / "r.duckdb"
    ingest(db, [tmp_path / "runs"])
    _, samples, _ = _stored(db)
    assert samples == [(step, v["strict"], v["math_verify"], 12) for step, v in sorted(versions.items())]

    # scores stored without settings say nothing of their code: the samples' versions are unknown
    metrics_file = run / "eval" / "metrics.parquet"
    pq.write_table(pq.read_table(metrics_file).drop(["settings"]), metrics_file)
    db = tmp_path / "unknown.duckdb"
    ingest(db, [tmp_path / "runs"])
    run_id, samples, _ = _stored(db)
    assert samples == [(10, None, None, 12), (20, None, None, 12)]
    with store.reader(db) as con:
        assert sample_checker_versions(con, [run_id], "math500", "strict") == {None}

    # unless the samples file records them itself
    pq.write_table(table, samples_file)
    db = tmp_path / "own.duckdb"
    ingest(db, [tmp_path / "runs"])
    _, samples, _ = _stored(db)
    assert samples == [(step, v["strict"], v["math_verify"], 12) for step, v in sorted(versions.items())]


def test_a_v7_store_keeps_its_samples_with_unknown_versions_and_forgets_their_files(tmp_path: Path) -> None:
    db = tmp_path / "r.duckdb"
    con = store_at_version(db, 7)
    con.execute(
        "INSERT INTO eval_samples (run_id, step, benchmark, problem_id, sample_index, correct_strict, "
        "correct_math_verify) VALUES ('r1', 10, 'MATH500', 'p0', 0, true, false)"
    )
    con.execute("INSERT INTO sources (owner, kind, path) VALUES ('r1', 'eval_samples', 'x'), ('r1', 'metrics', 'y')")
    con.close()
    with store.writer(db) as con:
        assert schema.current_version(con) == schema.SCHEMA_VERSION
        assert con.execute(
            "SELECT run_id, problem_id, correct_strict, checker_version_strict, checker_version_math_verify "
            "FROM eval_samples"
        ).fetchall() == [("r1", "p0", True, None, None)]
        assert sample_checker_versions(con, ["r1"], "math500", "math_verify") == {None}
        # the next ingest reloads the samples files, with the versions they or their units' scores record
        assert con.execute("SELECT kind FROM sources").fetchall() == [("metrics",)]


def test_synthetic_samples_carry_the_synthetic_checker_version(tmp_path: Path) -> None:
    spec = synthetic.SyntheticSpec(steps=10, samples_per_benchmark=8)
    synthetic.write_run(tmp_path / "runs" / "a", Cell("gt_grpo", "qwen3-4b-base", "math"), spec, seed=0)
    db = tmp_path / "r.duckdb"
    ingest(db, [tmp_path / "runs"])
    with store.reader(db) as con:
        (run_id,) = con.execute("SELECT run_id FROM runs").fetchone() or ("",)
        for checker in CHECKERS:
            assert sample_checker_versions(con, [run_id], "math500", checker) == {synthetic.SYNTHETIC_CHECKER_VERSION}
        versions = con.execute("SELECT DISTINCT settings::JSON->>'checker_version' FROM eval_metrics").fetchall()
    assert versions == [(synthetic.SYNTHETIC_CHECKER_VERSION,)]  # the scores say the same
