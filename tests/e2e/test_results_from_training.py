"""A real local training run writes run.json, and its folder ingests into the store with status, hashes and metrics."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from corewarding.config import compose_config
from corewarding.cpu import cpu_record
from corewarding.files import file_sha256
from corewarding.results.ingest.ingestion import ingest
from corewarding.results.store import store
from corewarding.training import run_record
from corewarding.training.local.trainer import train


def test_a_trained_run_ingests_with_its_record(artifacts_dir: Path, tmp_path: Path) -> None:
    overrides = [
        "experiment=tiny_cpu",
        "method=majority_voting",
        f"paths.artifacts_dir={artifacts_dir}",
        f"paths.runs_dir={tmp_path / 'runs'}",
        "base_model.tiny.sft_steps=300",
        "schedule.total_steps=2",
        "schedule.val_max_samples=2",
    ]
    result = train(compose_config(overrides), progress=False)
    record = json.loads((result.run_dir / "run.json").read_text())
    state = json.loads((result.run_dir / "checkpoints" / "global_step_2" / "trainer_state.json").read_text())
    assert record["status"] == "finished" and record["ended_at"] >= record["started_at"]
    assert record["config_hash"] == state["config_hash"]
    train_file = Path(record["data_files"]["train"]["path"])
    assert record["data_files"]["train"]["sha256"] == file_sha256(train_file)
    assert record["code_version"].startswith("0.1.0")
    assert record["cpu"] == cpu_record()  # the CPU whose kernels the run's figures depend on

    db = tmp_path / "results.duckdb"
    ingest(db, [tmp_path / "runs"])
    with store.reader(db) as con:
        run = con.execute(
            "SELECT cell_id, status, backend, config_hash, last_step, total_steps, code_version, "
            "data_hashes, started_at <= ended_at FROM runs"
        ).fetchone()
        val = con.execute(
            "SELECT step, value FROM training_metrics WHERE metric = 'val_accuracy' ORDER BY step"
        ).fetchall()
        rewards = con.execute(
            "SELECT step, value FROM training_metrics WHERE metric = 'reward_mean' ORDER BY step"
        ).fetchall()
    assert run is not None
    assert run[:7] == (
        "majority_voting__tiny__tiny",
        "finished",
        "local",
        state["config_hash"],
        2,
        2,
        record["code_version"],
    )
    assert json.loads(run[7]) == record["data_files"] and run[8] is True
    logged = [json.loads(line) for line in (result.run_dir / "metrics.jsonl").read_text().splitlines()]
    assert val == [(m["step"], pytest.approx(m["val_accuracy"])) for m in logged if "val_accuracy" in m]
    assert rewards == [(m["step"], pytest.approx(m["reward_mean"])) for m in logged if "reward_mean" in m]


def test_a_failed_run_is_recorded_with_its_error(tmp_path: Path) -> None:
    cfg = compose_config(["experiment=tiny_cpu"])
    run_record.record_start(tmp_path, cfg, "h1", "gt_grpo__tiny__tiny")
    first = json.loads((tmp_path / "run.json").read_text())
    run_record.record_end(tmp_path, "failed", RuntimeError("out of memory"))
    failed = json.loads((tmp_path / "run.json").read_text())
    assert failed["status"] == "failed" and failed["error"] == "RuntimeError: out of memory"
    run_record.record_start(tmp_path, cfg, "h1", "gt_grpo__tiny__tiny")  # a resume keeps the first start
    resumed = json.loads((tmp_path / "run.json").read_text())
    assert resumed["status"] == "running" and resumed["started_at"] == first["started_at"]
    assert len(resumed["resumed_at"]) == 1 and resumed["error"] is None and resumed["ended_at"] is None
