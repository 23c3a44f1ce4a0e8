"""Stores for the dashboard tests: a synthetic one (12 cells, every page has content) and a hand-written one."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from corewarding.matrix import load_matrix
from corewarding.results import synthetic
from corewarding.results.ingest.ingestion import ingest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture()
def app(synthetic_store: Path, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    """The dashboard under Streamlit's AppTest, reading the synthetic store."""
    monkeypatch.setenv("COREWARDING_RESULTS_DB", str(synthetic_store))
    return AppTest.from_file(str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py"), default_timeout=60)


@pytest.fixture(scope="session")
def synthetic_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The first 12 paper cells (Qwen2.5-3B and -7B on MATH), one running and one failed, with reports."""
    root = tmp_path_factory.mktemp("synthetic")
    runs, data = synthetic.write_result_set(root, load_matrix("paper").cells[:12], synthetic.SyntheticSpec())
    db = root / "results.duckdb"
    ingest(db, [runs], data_dirs=[data])
    return db


CELL_CONFIG = """backend: local
method: {name: majority_voting}
base_model: {name: qwen3-8b-base}
dataset: {name: math}
grpo: {max_response_length: 100}
"""


def _run(root: Path, name: str, started: str, evals: list[tuple[object, ...]], metrics: list[str]) -> Path:
    run = root / name
    (run / "eval").mkdir(parents=True)
    (run / "config.yaml").write_text(CELL_CONFIG)
    (run / "metrics.jsonl").write_text("".join(line + "\n" for line in metrics))
    (run / "run.json").write_text(json.dumps({"status": "finished", "started_at": started, "backend": "local"}))
    frame = pd.DataFrame(evals, columns=["step", "benchmark", "checker", "metric", "value"])
    frame["step"] = frame["step"].astype("Int64")
    frame["n"] = 8
    frame.to_parquet(run / "eval" / "metrics.parquet")
    return run


@pytest.fixture()
def hand_store(tmp_path: Path) -> Path:
    """Two runs of majority_voting x Qwen3-8B-Base x MATH with hand-set evaluations, samples and metrics."""
    old = _run(
        tmp_path / "runs",
        "old",
        "2026-01-01T00:00:00Z",
        [(10, "MATH500", "math_verify", "pass@1", 0.9)],
        ['{"step": 1, "reward_mean": 0.2}'],
    )
    new = _run(
        tmp_path / "runs",
        "new",
        "2026-02-01T00:00:00Z",
        [
            (None, "math500", "math_verify", "pass@1", 0.70),
            (10, "math500", "math_verify", "pass@1", 0.80),
            (20, "math500", "math_verify", "pass@1", 0.85),
            (30, "math500", "math_verify", "pass@1", 0.82),
            (30, "math500", "strict", "pass@1", 0.60),
            (30, "amc", "math_verify", "pass@1", 0.90),
            (30, "amc", "math_verify", "avg@8", 0.50),
        ],
        [
            '{"step": 0, "val_accuracy": 0.3}',
            '{"step": 1, "reward_mean": 0.5, "response_length_mean": 99, "step_seconds": 1800}',
            '{"step": 2, "reward_mean": 0.9, "val_accuracy": 0.6, "response_length_mean": 99, "step_seconds": 1800}',
            '{"step": 3, "reward_mean": 0.7, "response_length_mean": 99, "step_seconds": 3600}',
            '{"step": 4, "reward_mean": 0.8, "val_accuracy": 0.2, "response_length_mean": 99, "step_seconds": 1800}',
        ],
    )
    pd.DataFrame(
        {
            "step": 30,
            "benchmark": ["AMC"] * 4 + ["MATH500"] * 2,
            "problem_id": ["p1", "p1", "p2", "p2", "q", "q"],
            "sample_index": [0, 1, 0, 1, 0, 1],
            "response": ["x" * 500 + "\\boxed{3}", "b", "c", "d", "e", "f"],
            "extracted_answer": ["3", "4", None, "5", "1", "1"],
            "correct_strict": [True, False, False, True, True, False],
            "correct_math_verify": [True, True, False, True, True, True],
            "length": [100, 5, 100, 5, 5, 5],
            "truncated": [False, False, True, False, False, False],
            "question": ["What is 1+2?"] * 2 + ["Q2"] * 2 + ["x" * 130] * 2,
            "gold": ["3", "3", "5", "5", "1", "1"],
        }
    ).to_parquet(new / "eval" / "samples.parquet")
    db = tmp_path / "hand.duckdb"
    ingest(db, run_dirs=[old, new])
    return db


@pytest.fixture()
def chromium() -> str:
    """The chromium binary, or a skip (a failure under CI) before any server starts."""
    if CHROMIUM is None:
        if os.environ.get("CI"):
            pytest.fail("no chromium binary under CI: .ci/run must install it (make chromium)")
        pytest.skip("no chromium binary (apt-get install chromium, or make chromium); CI installs it")
    pytest.importorskip("playwright.sync_api", reason="playwright is in the dev extra")
    return CHROMIUM
