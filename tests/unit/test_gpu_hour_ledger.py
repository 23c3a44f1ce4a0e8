"""The GPU-hour ledger without training: a verl run's GPUs and phases in run.json, their rows in the store, runs
recorded before the ledger, and a store migrated from v5."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pandas as pd
import pytest
from omegaconf import OmegaConf

from corewarding.config import compose_config
from corewarding.results import ledger
from corewarding.results.ingest.ingestion import ingest
from corewarding.results.ingest.run_folders import RunFolderError
from corewarding.results.report.build import build_report
from corewarding.results.store import schema, store
from corewarding.training import run_record
from tests.support.old_store import store_at_version

CELL = "co_rewarding_2__qwen3-8b-base__math"
PHASES = [
    {"timing_s/gen": 100.0, "timing_s/update_actor": 50.0, "timing_s/step": 160.0, "actor/pg_loss": 0.1},
    {"timing_s/gen": 120.0, "timing_s/update_actor": 40.0, "timing_s/testing": 30.0, "timing_s/step": 200.0},
]


def _verl_run(run_dir: Path, attempts: list[list[dict[str, float]]]) -> dict:
    """A verl cell's record_start/record_end around verl logs written by hand (what its tracker writes)."""
    cfg = compose_config(["method=co_rewarding_2", "base_model=qwen3-8b-base", "dataset=math", "backend=verl"])
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.yaml").write_text(OmegaConf.to_yaml(cfg))
    run_record.record_start(run_dir, cfg, "hash1", CELL)
    logs = run_dir / "verl_logs"
    logs.mkdir(exist_ok=True)
    for n, records in enumerate(attempts, 1):
        lines = [json.dumps({"step": step, "data": data}) for step, data in enumerate(records, 1)]
        (logs / f"attempt-{n:03d}.jsonl").write_text("\n".join(lines) + "\n")
    (run_dir / "metrics.jsonl").write_text('{"step": 1, "step_seconds": 160.0}\n{"step": 2, "step_seconds": 200.0}\n')
    time.sleep(0.05)
    run_record.record_end(run_dir, "finished")
    return json.loads((run_dir / "run.json").read_text())


def test_a_verl_run_records_four_gpus_and_its_phases(tmp_path: Path) -> None:
    record = _verl_run(tmp_path / "runs" / CELL, [PHASES, PHASES[:1]])  # a second attempt redid step 1
    compute = record["compute"]
    assert (compute["device_type"], compute["devices"], compute["gpus"]) == ("cuda", 4, 4)
    [session] = compute["sessions"]
    assert session["seconds"] > 0 and compute["gpu_hours"] == pytest.approx(4 * session["seconds"] / 3600, abs=1e-6)
    # every attempt's records count (the redone step held the GPUs too); timing_s/step spans them and is no phase
    assert compute["phases"] == {
        "gen": {"seconds": 320.0, "device_hours": pytest.approx(4 * 320 / 3600, abs=1e-6)},
        "testing": {"seconds": 30.0, "device_hours": pytest.approx(4 * 30 / 3600, abs=1e-6)},
        "update_actor": {"seconds": 140.0, "device_hours": pytest.approx(4 * 140 / 3600, abs=1e-6)},
    }

    db = tmp_path / "r.duckdb"
    ingest(db, [tmp_path / "runs"])
    with store.reader(db) as con:
        phases = ledger.phase_hours(con).set_index("phase")
        mine = ledger.phase_hours(con, cell_ids=[CELL])
        none = ledger.phase_hours(con, cell_ids=["gt_grpo__tiny__tiny"])
        stored = con.execute("SELECT device_type, devices, gpu_hours FROM runs").fetchone()
        per_model = ledger.gpu_hours(con, by=("base_model", "dataset"))
        paper = ledger.matrix_gpu_hours(con, "paper")
    assert phases.loc["gen", "gpu_hours"] == pytest.approx(4 * 320 / 3600, abs=1e-4)
    assert phases.loc["update_actor", "seconds"] == 140.0 and phases.index[0] == "gen"  # largest first
    assert len(mine) == 3 and none.empty
    assert stored == ("cuda", 4, pytest.approx(compute["gpu_hours"]))
    assert per_model.to_dict("records")[0]["gpu_hours"] == pytest.approx(compute["gpu_hours"], abs=1e-4)
    assert paper["runs"] == 1 and paper["gpu_hours"] == pytest.approx(compute["gpu_hours"], abs=1e-4)
    # the report sums the ledger per method and model, and names the dry run whose estimate goes beside it
    page = build_report(db, "paper")
    section = page[page.index('<h2 id="gpu-hours">') :]
    assert f"{compute['gpu_hours']:.3f} GPU-hours" in section and "1 run(s) of 1 of its 66 cells" in section
    assert "<td>co_rewarding_2</td><td>qwen3-8b-base</td><td>1</td><td>0</td>" in section
    assert "corewarding pipeline run --matrix paper --dry-run" in section

    # a resume of the same configuration adds a session and keeps the first; a new configuration starts afresh
    run_dir = tmp_path / "runs" / CELL
    cfg = compose_config(["method=co_rewarding_2", "base_model=qwen3-8b-base", "dataset=math", "backend=verl"])
    run_record.record_start(run_dir, cfg, "hash1", CELL)
    run_record.record_end(run_dir, "interrupted")
    resumed = json.loads((run_dir / "run.json").read_text())["compute"]
    assert [s["status"] for s in resumed["sessions"]] == ["finished", "interrupted"]
    run_record.record_start(run_dir, cfg, "hash2", CELL)
    assert json.loads((run_dir / "run.json").read_text())["compute"]["sessions"] == []


def test_runs_without_a_ledger_count_as_unrecorded_not_as_zero(tmp_path: Path) -> None:
    run_dir = tmp_path / "runs" / "old"
    run_dir.mkdir(parents=True)
    (run_dir / "config.yaml").write_text(
        "backend: local\nmethod: {name: gt_grpo}\nbase_model: {name: tiny}\ndataset: {name: tiny}\n"
    )
    (run_dir / "metrics.jsonl").write_text('{"step": 1, "step_seconds": 2.0}\n')
    (run_dir / "run.json").write_text(json.dumps({"status": "finished", "started_at": "2026-01-01T00:00:00Z"}))
    db = tmp_path / "r.duckdb"
    ingest(db, [tmp_path / "runs"])
    with store.reader(db) as con:
        [row] = ledger.gpu_hours(con, by=("cell",)).to_dict("records")
        times = ledger.step_times(con).to_dict("records")
    assert row["cell"] == "gt_grpo__tiny__tiny" and row["runs"] == 1 and row["unrecorded"] == 1
    assert pd.isna(row["gpu_hours"])  # unknown, not 0
    assert pd.isna(times[0]["devices"]) and times[0]["step_seconds"] == 2.0
    with store.reader(db) as con, pytest.raises(ValueError, match="by=\\['gpu'\\]"):
        ledger.gpu_hours(con, by=("gpu",))


def test_a_bad_ledger_is_refused_naming_the_key(tmp_path: Path) -> None:
    run_dir = tmp_path / "runs" / "bad"
    run_dir.mkdir(parents=True)
    (run_dir / "config.yaml").write_text("method: {name: gt_grpo}\nbase_model: {name: tiny}\ndataset: {name: tiny}\n")
    (run_dir / "metrics.jsonl").write_text('{"step": 1}\n')
    (run_dir / "run.json").write_text(json.dumps({"status": "finished", "compute": {"gpu_hours": "lots"}}))
    with pytest.raises(RunFolderError, match=r"compute\.gpu_hours=.lots. is not a number"):
        ingest(tmp_path / "r.duckdb", [tmp_path / "runs"])
    assert not (tmp_path / "r.duckdb").exists()  # every folder is read before the store is opened


def test_a_v5_store_migrates_to_the_ledger(tmp_path: Path) -> None:
    db = tmp_path / "r.duckdb"
    con = store_at_version(db, 5)
    con.execute(
        "INSERT INTO runs (run_id, cell_id, method, base_model, dataset, status) VALUES "
        "('r@1', 'gt_grpo__tiny__tiny', 'gt_grpo', 'tiny', 'tiny', 'finished')"
    )
    con.close()
    with store.writer(db) as con:
        assert schema.current_version(con) == schema.SCHEMA_VERSION
        assert con.execute("SELECT device_type, gpu_hours FROM runs").fetchall() == [(None, None)]
        assert con.execute("SELECT count(*) FROM run_phase_hours").fetchone() == (0,)
