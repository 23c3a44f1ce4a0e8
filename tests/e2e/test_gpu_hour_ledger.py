"""The GPU-hour ledger of a real local training run: run.json records its device and wall time per launch, ingest
stores it, and the read functions sum it per method, base model and matrix."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from corewarding.config import compose_config
from corewarding.results import ledger
from corewarding.results.ingest.ingestion import ingest
from corewarding.results.store import store
from corewarding.training.local.trainer import train


def _overrides(method: str, artifacts: Path, runs: Path) -> list[str]:
    return [
        "experiment=tiny_cpu", f"method={method}", f"paths.artifacts_dir={artifacts}", f"paths.runs_dir={runs}",
        "base_model.tiny.sft_steps=300", "schedule.total_steps=2", "schedule.val_max_samples=2",
    ]  # fmt: skip


def test_a_local_run_records_its_device_hours_and_the_store_sums_them(artifacts_dir: Path, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    records = {}
    for method in ("majority_voting", "gt_grpo"):
        cfg = compose_config(_overrides(method, artifacts_dir, runs))
        started = time.time()
        result = train(cfg, progress=False)
        elapsed = time.time() - started
        records[method] = json.loads((result.run_dir / "run.json").read_text())
        compute = records[method]["compute"]
        assert (compute["device_type"], compute["devices"], compute["gpus"]) == ("cpu", 1, 0)
        [session] = compute["sessions"]
        assert session["status"] == "finished" and 0 < session["seconds"] <= elapsed + 1
        assert session["seconds"] >= result.seconds - 1  # the session spans the training loop
        assert compute["wall_seconds"] == pytest.approx(session["seconds"])
        assert compute["device_hours"] == pytest.approx(session["seconds"] / 3600, abs=1e-6)
        assert compute["gpu_hours"] == 0.0 and compute["phases"] == {}  # a CPU holds no GPU; no phases locally
        assert "session_started" not in compute

    # the same run launched again (it resumes from its last checkpoint): a second session, the totals add up
    again = train(compose_config(_overrides("gt_grpo", artifacts_dir, runs)), progress=False)
    compute = json.loads((again.run_dir / "run.json").read_text())["compute"]
    assert len(compute["sessions"]) == 2 and compute["sessions"][0] == records["gt_grpo"]["compute"]["sessions"][0]
    assert compute["wall_seconds"] == pytest.approx(sum(s["seconds"] for s in compute["sessions"]), abs=1e-3)
    records["gt_grpo"]["compute"] = compute

    db = tmp_path / "results.duckdb"
    ingest(db, [runs])
    with store.reader(db) as con:
        stored = con.execute(
            "SELECT method, device_type, devices, wall_seconds, device_hours, gpu_hours FROM runs ORDER BY method"
        ).fetchall()
        per_method = ledger.gpu_hours(con, by=("method",)).set_index("method")
        per_model = ledger.gpu_hours(con, by=("base_model",))
        demo = ledger.matrix_gpu_hours(con, "demo")
        paper = ledger.matrix_gpu_hours(con, "paper")
        times = ledger.step_times(con)
    for method, device, devices, wall, device_hours, gpu_hours in stored:
        c = records[method]["compute"]
        assert (device, devices, gpu_hours) == ("cpu", 1, 0.0)
        assert wall == pytest.approx(c["wall_seconds"]) and device_hours == pytest.approx(c["device_hours"])
    for method in records:
        row = per_method.loc[method]
        assert row["runs"] == 1 and row["unrecorded"] == 0 and row["device_types"] == "cpu"
        assert row["device_hours"] == pytest.approx(records[method]["compute"]["device_hours"], abs=1e-4)
        assert row["gpu_hours"] == 0.0
    total = sum(r["compute"]["device_hours"] for r in records.values())
    assert per_model["base_model"].tolist() == ["tiny"]
    assert per_model["device_hours"].iloc[0] == pytest.approx(total, abs=1e-4)
    assert demo["runs"] == 2 and demo["cells_run"] == 2 and demo["device_hours"] == pytest.approx(total, abs=1e-4)
    assert paper["runs"] == 0 and paper["device_hours"] == 0.0  # no paper cell was trained
    # the measured step times the dry run reads: the mean of each run's logged step_seconds
    for method in records:
        logged = [
            json.loads(line)["step_seconds"]
            for line in (runs / f"{method}__tiny__tiny" / "metrics.jsonl").read_text().splitlines()
            if "step_seconds" in line
        ]
        row = times[times["method"] == method].iloc[0]
        assert row["steps"] == len(logged) == 2 and row["step_seconds"] == pytest.approx(sum(logged) / 2)
        assert (row["backend"], row["device_type"], row["devices"]) == ("local", "cpu", 1)
