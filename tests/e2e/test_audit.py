"""`corewarding audit` end to end on CPU: three released checkpoints of paper_v3 served by the local Hub-API server
(the tiny model under the paper's repo ids) and one repo that does not exist, audited through the Prefect flow with
transformers generation on the tiny benchmark; a second run skips them without asking the Hub; ``seed=1`` adds a
second score beside the first; the report shows paper, released and reproduced side by side."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import huggingface_hub
import pytest
from huggingface_hub import HfApi

from corewarding.evaluation.targets import HUB_FILES
from corewarding.matrix import Cell, hub_repo_id
from corewarding.tiny.data import write_tiny_dataset
from corewarding.tiny.model import build_tiny_model
from tests.support.hub_server import HubServer

BIN = Path(sys.executable).parent
RELEASED = [Cell(m, "qwen3-1.7b-base", "math") for m in ("gt_grpo", "majority_voting", "co_rewarding_1")]
MISSING = Cell("entropy", "qwen3-1.7b-base", "math")  # its repo is not on the server


def _audit(work: Path, env: dict[str, str], cells: list[Cell], *extra: str) -> subprocess.CompletedProcess[str]:
    command = [
        str(BIN / "corewarding"), "audit", "--matrix", "paper_v3", "--cell", ",".join(c.cell_id for c in cells),
        "--benchmarks", "tiny", "--generation", "transformers", "--config", f"results_db={work / 'results.duckdb'}",
        "benchmark.limit=4", "math_verify.workers=1", "bootstrap.samples=200", *extra,
    ]  # fmt: skip
    return subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, timeout=600)


def _released_rows(db: Path) -> list[tuple[str, int, int]]:
    """Per released checkpoint: its metric rows and their distinct settings keys."""
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(
            "SELECT run_id, count(*), count(DISTINCT settings_key) FROM eval_metrics WHERE source = 'released' "
            "GROUP BY run_id ORDER BY run_id"
        ).fetchall()


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_audit_stores_released_scores_with_their_settings_skips_them_again_and_keeps_a_second_seed(
    artifacts_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)  # tests/conftest.py sets offline mode
    model = build_tiny_model(artifacts_dir / "tiny-model-sft300", sft_steps=300)
    work = tmp_path / "work"
    write_tiny_dataset(work / "artifacts" / "tiny-data", n_train=64, n_test=16, seed=0)
    with HubServer() as server:
        api = HfApi(endpoint=server.url, token="hf_test")
        for cell in RELEASED:
            api.create_repo(hub_repo_id(cell), exist_ok=True)
            api.upload_folder(repo_id=hub_repo_id(cell), folder_path=str(model), allow_patterns=HUB_FILES)
        env = {**os.environ, "HF_ENDPOINT": server.url, "HF_HUB_OFFLINE": "0", "HF_HOME": str(tmp_path / "hf"),
               "HF_TOKEN": "hf_test", "PREFECT_HOME": str(tmp_path / "prefect")}  # fmt: skip

        first = _audit(work, env, [*RELEASED, MISSING])
        assert first.returncode == 1, first.stderr[-3000:]
        assert "1 checkpoint(s) not audited" in first.stderr, first.stderr[-3000:]
        missing_line = f"{MISSING.cell_id}: audit: ReleasedUnavailable: {hub_repo_id(MISSING)}@main: no such repository"
        assert missing_line in first.stderr, first.stderr[-3000:]
        rows = _released_rows(work / "results.duckdb")
        assert [r[0] for r in rows] == sorted(f"released/{c.cell_id}" for c in RELEASED)
        # strict and math_verify x avg@4, pass@4, maj@4; the checker is one of the settings, so two keys
        assert all(count == 6 and keys == 2 for _, count, keys in rows)

        with duckdb.connect(str(work / "results.duckdb"), read_only=True) as con:
            audited = dict(con.execute("SELECT cell_id, status FROM released_checkpoints").fetchall())
            settings = json.loads(con.execute("SELECT settings FROM eval_metrics WHERE run_id = ? "
                                              "AND checker = 'math_verify' LIMIT 1",
                                              [f"released/{RELEASED[0].cell_id}"]).fetchone()[0])  # fmt: skip
            error = con.execute(
                "SELECT error FROM released_checkpoints WHERE cell_id = ?", [MISSING.cell_id]
            ).fetchone()
        assert audited == {**{c.cell_id: "done" for c in RELEASED}, MISSING.cell_id: "failed"}
        assert error is not None and error[0].startswith(f"{hub_repo_id(MISSING)}@main: no such repository")
        commit = server.state.history(hub_repo_id(RELEASED[0]))[0].oid
        assert settings["generation_backend"] == "transformers" and settings["generation_version"]
        assert settings["seed"] == 0 and settings["n"] == 4 and settings["temperature"] == 0.8
        assert settings["checker_tool"] == "math_verify" and settings["checker_version"]
        assert len(settings["chat_template_sha256"]) == 16 and len(settings["benchmark_sha256"]) == 64
        assert settings["model_revision"] == f"{hub_repo_id(RELEASED[0])}@{commit}"

        asked = len(server.state.requests)
        second = _audit(work, env, RELEASED)
        assert second.returncode == 0, second.stderr[-3000:]
        assert second.stdout.count("skipped") >= 3, second.stdout
        assert len(server.state.requests) == asked  # a finished audit is skipped without asking the Hub
        assert _released_rows(work / "results.duckdb") == rows

        third = _audit(work, env, RELEASED[:1], "seed=1")
        assert third.returncode == 0, third.stderr[-3000:]
        after = _released_rows(work / "results.duckdb")
        changed = f"released/{RELEASED[0].cell_id}"
        assert [r for r in after if r[0] == changed] == [(changed, 12, 4)]  # a new score beside the old one
        assert [r for r in after if r[0] != changed] == [r for r in rows if r[0] != changed]

    report = work / "report.html"
    made = subprocess.run(
        [str(BIN / "corewarding"), "report", "--matrix", "paper_v3", "--db", str(work / "results.duckdb"),
         "--out", str(report)], cwd=work, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr[-2000:]
    html = report.read_text()
    assert "Released checkpoints: paper · released · reproduced" in html
    assert all(c.cell_id in html for c in RELEASED) and "settings differ" in html  # seed 0 beside seed 1
    assert "1 released checkpoint(s) could not be audited" in html and MISSING.cell_id in html
