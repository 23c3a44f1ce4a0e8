"""Issue 32, as it was found: a tampered ``released/audit.json`` naming another repository at a made-up revision is
not skipped as audited, and the store never credits the scores to that repository; ``--force`` during a Hub outage
keeps the good audit and its scores and writes the failure beside it. The released checkpoint is the tiny model served
by the local Hub-API server under the paper's repo id; the audit is the pipeline's step, on the tiny benchmark."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import huggingface_hub
import pandas as pd
import pytest
from huggingface_hub import HfApi

from corewarding.evaluation.targets import HUB_FILES
from corewarding.matrix import hub_repo_id
from corewarding.pipeline.audit import ReauditFailed, audit_cell
from corewarding.pipeline.cells import CellPlan, plan_cell
from corewarding.pipeline.run_summary import CellReport, PipelineReport, format_report
from corewarding.results.ingest.ingestion import ingest
from corewarding.results.ingest.released import read_record
from corewarding.run_folder import AUDIT_FAILURE, AUDIT_RECORD, released_dir
from corewarding.tiny.data import write_tiny_dataset
from corewarding.tiny.model import build_tiny_model
from tests.support.hub_server import HubServer

CELL = "gt_grpo__qwen3-1.7b-base__math"
ATTACKER = "attacker/Other-Model"


@pytest.fixture
def hub(artifacts_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The local Hub serving the tiny model as the cell's released checkpoint and as the attacker's repository."""
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "cache"))
    model = build_tiny_model(artifacts_dir / "tiny-model")
    with HubServer() as server:
        monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", server.url)
        template = server.url + "/{repo_id}/resolve/{revision}/{filename}"
        monkeypatch.setattr(huggingface_hub.constants, "HUGGINGFACE_CO_URL_TEMPLATE", template)
        api = HfApi(endpoint=server.url, token="hf_test")
        for repo in (released_repo(), ATTACKER):
            api.create_repo(repo, exist_ok=True)
            api.upload_folder(repo_id=repo, folder_path=str(model), allow_patterns=HUB_FILES)
        yield server


def released_repo() -> str:
    return hub_repo_id(plan_cell("paper_v3", CELL).cell)


@pytest.fixture
def plan(tmp_path: Path) -> CellPlan:
    artifacts = tmp_path / "artifacts"
    write_tiny_dataset(artifacts / "tiny-data", n_train=64, n_test=16, seed=0)
    paths = [f"paths.runs_dir={tmp_path / 'runs'}", f"paths.artifacts_dir={artifacts}"]
    evaluation = ["generation=transformers", "benchmark.limit=4", "math_verify.workers=1", "bootstrap.samples=200"]
    return plan_cell("paper_v3", CELL, paths, evaluation)


def stored(db: Path) -> tuple[list[tuple[Any, ...]], int]:
    """The store's released checkpoint rows (repo, revision, status, error) and its released metric rows."""
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute("SELECT hub_repo_id, revision, status, error FROM released_checkpoints").fetchall()
        (metrics,) = con.execute("SELECT count(*) FROM eval_metrics WHERE source = 'released'").fetchone() or (0,)
    return rows, int(metrics)


def released_score(folder: Path) -> float:
    """The released checkpoint's headline score as the report reads it: math-verify avg@4 on tiny."""
    frame = pd.read_parquet(folder / "eval" / "metrics.parquet")
    row = frame[(frame.checker == "math_verify") & (frame.metric == "avg@4")].iloc[0]
    return float(row["value"])


def tamper(folder: Path, **values: Any) -> None:
    record = json.loads((folder / AUDIT_RECORD).read_text())
    (folder / AUDIT_RECORD).write_text(json.dumps({**record, **values}))


@pytest.mark.timeout(600)
def test_a_record_naming_another_repository_is_audited_again_and_never_credited_to_it(
    hub: Any, plan: CellPlan, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = released_dir(plan.run_dir)
    assert audit_cell(plan, "tiny").status == "done"
    commit = hub.state.history(released_repo())[0].oid
    assert read_record(folder).revision == commit
    assert audit_cell(plan, "tiny").status == "skipped"  # the honest record is skipped, as before

    tamper(folder, hub_repo_id=ATTACKER, revision="f" * 40)
    asked = len(hub.state.requests)
    with caplog.at_level(logging.WARNING):
        result = audit_cell(plan, "tiny")
    assert result.status == "done" and result.detail["revision"] == f"{released_repo()}@{commit}"
    since = hub.state.requests[asked:]
    assert since and not [r for r in since if ATTACKER in r.path]  # audited from the matrix's repo, not the record's
    said = [r.getMessage() for r in caplog.records if str(folder / AUDIT_RECORD) in r.getMessage()]
    assert said == [f"{folder / AUDIT_RECORD}: it names {ATTACKER}, the matrix names {released_repo()}; "
                    f"auditing {released_repo()} again from the Hub"]  # fmt: skip
    record = read_record(folder)
    assert (record.hub_repo_id, record.revision, record.status) == (released_repo(), commit, "done")
    ingest(tmp_path / "results.duckdb", run_dirs=[plan.run_dir])
    rows, metrics = stored(tmp_path / "results.duckdb")
    assert rows == [(released_repo(), commit, "done", None)] and metrics > 0


@pytest.mark.timeout(600)
def test_a_made_up_revision_of_the_right_repository_is_not_skipped(
    hub: Any, plan: CellPlan, caplog: pytest.LogCaptureFixture
) -> None:
    folder = released_dir(plan.run_dir)
    audit_cell(plan, "tiny")
    commit = hub.state.history(released_repo())[0].oid
    for fake, why in (("v1.0-final", "its revision 'v1.0-final' is not a Hub commit"),
                      ("e" * 40, f"no evaluation unit in {folder / 'eval'} was generated from "
                                 f"{released_repo()}@{'e' * 40}")):  # fmt: skip
        tamper(folder, revision=fake)
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            assert audit_cell(plan, "tiny").status == "done"
        assert any(r.getMessage().startswith(f"{folder / AUDIT_RECORD}: {why}; ") for r in caplog.records), fake
        assert read_record(folder).revision == commit


@pytest.mark.timeout(600)
def test_a_forced_reaudit_during_a_hub_outage_keeps_the_good_audit(
    hub: Any, plan: CellPlan, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = released_dir(plan.run_dir)
    audit_cell(plan, "tiny")
    good = (folder / AUDIT_RECORD).read_bytes()
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "another-machine"))  # not cached
    hub.state.fail_next(".*", count=1000, status=503)
    with pytest.raises(ReauditFailed) as caught:
        audit_cell(plan, "tiny", force=True)
    line = str(caught.value)
    assert "\n" not in line and line.startswith(f"ReleasedUnavailable: {released_repo()}@")
    assert f"and its scores are kept, this failure is in {folder / AUDIT_FAILURE}" in line
    assert (folder / AUDIT_RECORD).read_bytes() == good  # the good record, byte for byte
    failure = json.loads((folder / AUDIT_FAILURE).read_text())
    assert failure["error"].startswith("ReleasedUnavailable: ") and failure["failed_at"]
    assert failure["revision"] == read_record(folder).revision

    ingest(tmp_path / "results.duckdb", run_dirs=[plan.run_dir])  # the pipeline ingests after a failed audit
    rows, metrics = stored(tmp_path / "results.duckdb")
    assert [r[2] for r in rows] == ["done"] and metrics > 0  # the good scores, not "failed"
    cell = CellReport(CELL, str(plan.run_dir), steps={"audit": "failed", "ingest": "done"}, error=f"audit: {line}")
    _, _, line_of_cell, failed_line = format_report(PipelineReport("paper_v3", [cell])).splitlines()
    assert line_of_cell.split()[5] == "failed" and line_of_cell.endswith(f"= {released_score(folder):.3f}")
    assert failed_line == f"FAILED {CELL}: audit: {line}"  # the failed re-audit, and the kept score in its row

    hub.state.faults.clear()
    assert audit_cell(plan, "tiny", force=True).status == "done"  # the Hub is back: a new audit replaces it
    assert not (folder / AUDIT_FAILURE).exists()
