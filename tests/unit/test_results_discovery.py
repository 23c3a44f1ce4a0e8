"""Which run folders ingestion takes: publish/ copies are not runs, a run copied elsewhere is ingested once."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from corewarding.matrix import Cell, hub_repo_id, load_matrix
from corewarding.results import synthetic
from corewarding.results.ingest.ingestion import ingest
from corewarding.results.ingest.run_folders import find_run_dirs
from corewarding.results.ingest.run_rows import ingest_run
from corewarding.results.ingest.sources import IngestSummary
from corewarding.results.store import schema, store

SPEC = synthetic.SyntheticSpec(steps=6, eval_every=3, test_freq=3, samples_per_benchmark=8)
CELL = load_matrix("paper").cells[0]
DEMO = Cell("gt_grpo", "tiny", "tiny")


@pytest.fixture()
def runs_dir(tmp_path: Path) -> Path:
    """runs/<cell> (published at step 6, with a full copy of itself under publish/), runs/demo/<tiny cell>."""
    root = tmp_path / "runs"
    run = synthetic.write_run(root / CELL.cell_id, CELL, SPEC, seed=0)
    synthetic.write_push_record(run, hub_repo_id(CELL), 6)
    copy = run / "publish" / "global_step_6" / "run-copy"
    shutil.copytree(run, copy, ignore=shutil.ignore_patterns("publish", "checkpoints"))
    synthetic.write_run(root / "demo" / DEMO.cell_id, DEMO, SPEC, seed=1)
    return root


def _runs(db: Path) -> list[tuple[str, str, int | None, str | None]]:
    with store.reader(db) as con:
        rows = con.execute(
            "SELECT cell_id, run_dir, published_step, published_commit FROM runs ORDER BY cell_id"
        ).fetchall()
    return [(str(c), str(d), s, m) for c, d, s, m in rows]


def test_publish_copies_and_demo_runs_are_ingested_once(
    runs_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    assert [p.relative_to(runs_dir).as_posix() for p in find_run_dirs(runs_dir)] == [
        f"demo/{DEMO.cell_id}",
        CELL.cell_id,
    ]
    mirror = tmp_path / "mirror" / "runs"  # the same run pulled from the shared store: same run.json
    shutil.copytree(runs_dir / CELL.cell_id, mirror / CELL.cell_id, ignore=shutil.ignore_patterns("publish"))
    db = tmp_path / "r.duckdb"
    with caplog.at_level(logging.WARNING, "corewarding.results.ingest.run_rows"):
        summary = ingest(db, [runs_dir, runs_dir / "demo"], run_dirs=[mirror / CELL.cell_id])
    assert summary.runs == 2 and summary.duplicates == [str((mirror / CELL.cell_id).resolve())]
    assert summary.to_dict()["duplicates_skipped"] == 1 and "a copy of run" in caplog.text
    stored = _runs(db)
    assert [c for c, *_ in stored] == [CELL.cell_id, DEMO.cell_id]  # each run once
    assert stored[0][1:] == (str((runs_dir / CELL.cell_id).resolve()), 6, "00061" + "0" * 35)
    assert stored[1][2:] == (None, None)  # the demo run was never pushed
    with store.reader(db) as con:
        per_run = con.execute("SELECT count(DISTINCT run_id), count(*) FROM eval_samples").fetchone()
    assert per_run == (2, 2 * 7 * 8)

    again = ingest(db, run_dirs=[mirror / CELL.cell_id])  # the copy on its own, later: still a copy
    assert again.runs == 0 and len(again.duplicates) == 1 and len(_runs(db)) == 2


def test_a_run_stored_twice_by_an_earlier_ingest_keeps_one_copy(runs_dir: Path, tmp_path: Path) -> None:
    db = tmp_path / "r.duckdb"
    original, copy = runs_dir / CELL.cell_id, tmp_path / "backup" / "old" / CELL.cell_id
    shutil.copytree(original, copy)
    with store.writer(db) as con:  # what ingestion did before copies were recognised: two runs
        for folder in (original, copy):
            ingest_run(con, folder, IngestSummary())
    assert len(_runs(db)) == 2
    summary = ingest(db, run_dirs=[copy, original])
    assert summary.duplicates == [str(copy.resolve())]
    assert [d for _, d, *_ in _runs(db)] == [str(original.resolve())]
    with store.reader(db) as con:
        assert con.execute("SELECT count(DISTINCT run_id) FROM training_metrics").fetchone() == (1,)
        assert con.execute("SELECT count(DISTINCT owner) FROM sources WHERE kind = 'metrics'").fetchone() == (1,)


def test_a_v1_store_migrates_and_old_samples_files_load_without_question_and_gold(tmp_path: Path) -> None:
    db = tmp_path / "r.duckdb"
    run = synthetic.write_run(tmp_path / "runs" / CELL.cell_id, CELL, SPEC, seed=0)
    con = duckdb.connect(str(db))
    schema.migrate(con, {1: schema.MIGRATIONS[1]})
    con.close()
    assert ingest(db, run_dirs=[run]).rows["eval_samples"] == 7 * 8
    with store.reader(db) as reader:
        question, gold = reader.execute("SELECT question, gold FROM eval_samples LIMIT 1").fetchone()  # type: ignore[misc]
        assert schema.current_version(reader) == schema.SCHEMA_VERSION
    assert question.startswith("Problem 0 of AMC: what is x") and gold is not None
    old = tmp_path / "old"
    synthetic.write_run(old / CELL.cell_id, CELL, SPEC, seed=3)
    samples = old / CELL.cell_id / "eval" / "samples.parquet"
    pd.read_parquet(samples).drop(columns=["question", "gold"]).to_parquet(samples)
    ingest(db, run_dirs=[old / CELL.cell_id])
    with store.reader(db) as reader:
        assert reader.execute(
            "SELECT count(*) FILTER (WHERE question IS NULL AND gold IS NULL) FROM eval_samples"
        ).fetchone() == (7 * 8,)
