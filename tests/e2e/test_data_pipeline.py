"""The data pipeline end to end on CPU: the tiny model rephrasing (killed and resumed) and `dvc repro` in a clone."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.support.repo import clone_project, dvc_bin, run_dvc, track_data

REPO = Path(__file__).resolve().parents[2]


def _cli(*args: str, cwd: Path = REPO) -> subprocess.Popen:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "corewarding.cli", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _run(*args: str) -> None:
    proc = _cli(*args)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err.decode()[-3000:]


def _records(path: Path) -> list[dict]:
    records = [json.loads(line) for line in path.read_text().split("\n") if line]
    return sorted(records, key=lambda r: (r["row"], r["attempt"]))


@pytest.mark.slow
def test_rephrase_killed_mid_run_resumes_to_the_same_outputs(tmp_path: Path, artifacts_dir: Path) -> None:
    common = [f"paths.artifacts_dir={artifacts_dir}", "rephrase.batch_size=8"]
    for name in ("full", "killed"):
        _run("data", "prepare", "tiny", f"paths.data_dir={tmp_path / name}", *common)
    _run("data", "rephrase", "tiny", f"paths.data_dir={tmp_path / 'full'}", *common)

    raw = tmp_path / "killed/tiny/train_rephrase_raw.jsonl"
    proc = _cli("data", "rephrase", "tiny", f"paths.data_dir={tmp_path / 'killed'}", *common)
    deadline = time.monotonic() + 240
    while not (raw.exists() and raw.read_text().count("\n") >= 24) and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    at_kill = raw.read_text().count("\n")
    total = (tmp_path / "full/tiny/train_rephrase_raw.jsonl").read_text().count("\n")
    assert 24 <= at_kill < total, "the run was not interrupted mid-way"
    assert not (tmp_path / "killed/tiny/train_rephrased.parquet").exists()
    with raw.open("a") as handle:  # a line cut off by the kill
        handle.write('{"key": "x", "row": 5')

    _run("data", "rephrase", "tiny", f"paths.data_dir={tmp_path / 'killed'}", *common)
    assert _records(raw) == _records(tmp_path / "full/tiny/train_rephrase_raw.jsonl")
    for name in ("train_rephrased", "train_original", "train_pairs"):
        killed = pq.read_table(tmp_path / f"killed/tiny/{name}.parquet").to_pylist()
        assert killed == pq.read_table(tmp_path / f"full/tiny/{name}.parquet").to_pylist()
    report = json.loads((tmp_path / "killed/tiny/train_rephrased.quality.json").read_text())
    # The random-weight tiny model never writes the markers: every row fails 3 attempts and keeps its original.
    assert report["generations"] == total == 64 * 3
    assert report["rejected"] == {"missing_markers": 64} and report["rows_out"] == 64
    assert {r["attempts"] for r in report["rejected_rows"]} == {3}


@pytest.mark.slow
def test_dvc_repro_of_the_tiny_set_then_noop_then_only_rephrase_reruns(tmp_path: Path) -> None:
    if not dvc_bin().exists():
        pytest.skip("dvc is not installed in this environment")
    clone = clone_project(tmp_path)
    assert "@" not in run_dvc(clone, "status")  # a fresh clone's DVC knows no data set and no cell
    track_data(clone, "tiny")
    first = run_dvc(clone, "repro", "rephrase@tiny")
    assert "Running stage 'prepare@tiny'" in first and "Running stage 'rephrase@tiny'" in first
    assert len(pq.read_table(clone / "data/tiny/train_rephrased.parquet")) == 64

    again = run_dvc(clone, "repro", "rephrase@tiny")
    assert "Running stage" not in again and "up to date" in again

    metrics = json.loads(run_dvc(clone, "metrics", "show", "--json"))
    shown = json.dumps(metrics)
    assert '"rows_in": 64' in shown and '"generations": 192' in shown

    params = clone / "configs/rephrase/transformers_tiny.yaml"
    params.write_text(params.read_text().replace("max_retries: 2", "max_retries: 1"))
    status = run_dvc(clone, "status")
    assert "rephrase@tiny" in status and "prepare@tiny" not in status
    rerun = run_dvc(clone, "repro", "rephrase@tiny")
    assert "Running stage 'rephrase@tiny'" in rerun and "Running stage 'prepare@tiny'" not in rerun
    report = json.loads((clone / "data/tiny/train_rephrased.quality.json").read_text())
    assert report["generations"] == 64 * 2


@pytest.mark.slow
def test_dvc_prepare_reads_a_local_file_and_a_failed_rerun_keeps_the_good_output(tmp_path: Path) -> None:
    if not dvc_bin().exists():
        pytest.skip("dvc is not installed in this environment")
    clone = clone_project(tmp_path)
    source = tmp_path / "math500.jsonl"
    rows = [{"problem": f"What is {i} + {i}?", "answer": str(2 * i), "level": 1, "subject": "Algebra",
             "unique_id": f"test/algebra/{i}.json"} for i in range(5)]  # fmt: skip
    source.write_text("".join(json.dumps(row) + "\n" for row in rows))
    config = clone / "configs/datasource/math500.yaml"
    original = config.read_text()
    local = original.replace("local_file: null", f"local_file: {source}").replace(
        "tokenizer: Qwen/Qwen2.5-3B", "tokenizer: null"
    )
    config.write_text(local)

    # Offline from a local copy: the stage reads the file named in its params, no Hub.
    track_data(clone, "math500")
    run_dvc(clone, "repro", "prepare@math500")
    output = clone / "data/math500/test.parquet"
    prepared = output.read_bytes()
    assert len(pq.read_table(output)) == 5

    # A rerun that fails (the local file is gone) ends nonzero and leaves the earlier output as it was.
    config.write_text(local.replace(str(source), str(tmp_path / "missing.jsonl")))
    env = {**os.environ, "PATH": f"{dvc_bin().parent}:{os.environ['PATH']}", "DVC_NO_ANALYTICS": "1"}
    failed = subprocess.run([str(dvc_bin()), "repro", "prepare@math500"], cwd=clone, env=env, capture_output=True,
                            text=True, timeout=300)  # fmt: skip
    assert failed.returncode != 0 and "missing.jsonl" in failed.stdout + failed.stderr
    assert output.read_bytes() == prepared
