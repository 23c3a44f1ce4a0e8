"""The audit's parts without Prefect: fetching a released checkpoint at a pinned commit from the local Hub-API server,
one line per Hub failure, the job a work pool's worker gets, and the dry run's estimate (hand-computed)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import huggingface_hub
import pandas as pd
import pytest
from huggingface_hub import HfApi

from corewarding.config import compose_config
from corewarding.evaluation.eval_config import benchmark_configs
from corewarding.matrix import Cell
from corewarding.pipeline.audit import ReleasedUnavailable, fetch_released
from corewarding.pipeline.audit_plan import estimate
from corewarding.pipeline.cells import plan_cells
from corewarding.pipeline.jobs import cell_job
from corewarding.pipeline.run_summary import CellReport, PipelineReport, format_report
from corewarding.pipeline.settings import load_settings
from corewarding.results.ingest.released import ReleasedRecord
from tests.support.hub_server import HubServer


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Any]:
    """The local Hub with one model repo (two commits), offline mode lifted and a private download cache."""
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "cache"))
    with HubServer() as server:
        monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", server.url)  # both read HF_ENDPOINT at import
        template = server.url + "/{repo_id}/resolve/{revision}/{filename}"
        monkeypatch.setattr(huggingface_hub.constants, "HUGGINGFACE_CO_URL_TEMPLATE", template)
        api = HfApi(endpoint=server.url, token="hf_test")
        for version in ("1", "2"):
            folder = tmp_path / f"model-{version}"
            folder.mkdir()
            (folder / "config.json").write_text(json.dumps({"version": version}))
            api.create_repo("org/released", exist_ok=True)
            api.upload_folder(repo_id="org/released", folder_path=str(folder))
        yield server


def test_a_released_checkpoint_is_fetched_at_its_pinned_commit(hub: Any) -> None:
    newest, first = [c.oid for c in hub.state.history("org/released")[:2]]
    folder, commit = fetch_released("org/released", None)
    assert commit == newest and json.loads((Path(folder) / "config.json").read_text()) == {"version": "2"}
    folder, commit = fetch_released("org/released", first)  # what an earlier audit recorded
    assert commit == first and json.loads((Path(folder) / "config.json").read_text()) == {"version": "1"}


def test_every_hub_failure_is_one_line_naming_repo_revision_and_cause(
    hub: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def failure(repo_id: str, revision: str | None) -> str:
        with pytest.raises(ReleasedUnavailable) as caught:
            fetch_released(repo_id, revision)
        assert "\n" not in str(caught.value)
        return str(caught.value)

    assert failure("org/absent", None) == "org/absent@main: no such repository (or a private one: set HF_TOKEN)"
    assert failure("org/released", "f" * 40) == f"org/released@{'f' * 40}: no such revision in the repository"
    hub.state.repo("org/released").gated = True
    assert failure("org/released", None) == (
        "org/released@main: a gated repository: accept its terms on the Hub, then set HF_TOKEN"
    )
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # no network and nothing cached for this repo
    assert failure("org/other", None) == (
        "org/other@main: the Hub cannot be reached (no network, or HF_HUB_OFFLINE=1) and the files are not cached"
    )


def test_an_audit_job_carries_only_the_audit_step_and_its_benchmarks() -> None:
    settings = load_settings(
        ["audit.benchmarks=tiny"], matrix="paper_v3", cells=["gt_grpo__qwen3-4b-base__math"], steps=["audit", "ingest"]
    )
    (plan,) = plan_cells(settings.selection, settings.overrides, settings.eval_overrides)
    job = cell_job(plan, settings, "/shared/store")
    assert job.steps == ("audit",) and job.audit_benchmarks == "tiny"
    assert type(job).from_parameters(job.to_parameters()) == job  # what a worker on another machine receives


def test_the_dry_run_uses_a_measured_throughput_and_says_when_it_assumes_one(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    record = ReleasedRecord("gt_grpo__qwen3-4b-base__math", "gt_grpo", "qwen3-4b-base", "math", "org/a", "done")
    record.throughput = {"backend": "vllm", "samples": 100, "tokens": 50_000, "seconds": 10.0}
    (runs / record.cell_id / "released").mkdir(parents=True)
    record.write(runs / record.cell_id / "released")
    configs = benchmark_configs(["tiny"], ["generation=vllm", f"paths.artifacts_dir={tmp_path}/none"])
    cells = [Cell("gt_grpo", "qwen3-4b-base", "math"), Cell("entropy", "qwen3-4b-base", "math"),
             Cell("gt_grpo", "qwen3-8b-base", "math")]  # fmt: skip
    measured, assumed = estimate(cells, configs, runs)
    # tiny: 16 problems (configs/audit.yaml; no prepared file here) x n=4 = 64 samples per checkpoint
    assert (measured.cells, measured.evaluations, measured.samples) == (2, 2, 128)
    assert measured.throughput.tokens_per_s == 5000 and measured.throughput.tokens_per_sample == 500
    assert measured.gpu_hours == pytest.approx(128 * 500 / 5000 / 3600)
    assert measured.throughput.source.startswith("measured: 100 samples")
    audit_cfg = compose_config([], config_name="audit")
    params_b = float(compose_config(["base_model=qwen3-8b-base"]).base_model.shape.params_b)
    rate = float(audit_cfg.assumed.tokens_per_s_times_params_b) / params_b
    per_sample = float(audit_cfg.assumed.response_fraction) * 24  # tiny's max_new_tokens
    assert assumed.throughput.tokens_per_s == pytest.approx(rate) and assumed.samples == 64
    assert assumed.gpu_hours == pytest.approx(64 * per_sample / rate / 3600)
    assert assumed.throughput.source.startswith("assumed, not measured")


def test_the_audit_report_shows_the_audit_step_and_the_released_score(tmp_path: Path) -> None:
    run_dir = tmp_path / "runs" / "gt_grpo__qwen3-4b-base__math"
    (run_dir / "released" / "eval").mkdir(parents=True)
    rows = {"step": [None, None], "benchmark": ["math500", "math500"], "checker": ["strict", "math_verify"],
            "metric": ["pass@1", "pass@1"], "value": [0.25, 0.75]}  # fmt: skip
    pd.DataFrame(rows).to_parquet(run_dir / "released" / "eval" / "metrics.parquet")
    cell = CellReport(run_dir.name, str(run_dir), steps={"audit": "done", "ingest": "done"})
    header, _, line = format_report(PipelineReport("paper_v3", [cell])).splitlines()
    assert header.split()[:6] == ["cell", "train", "evaluate", "ingest", "publish", "audit"]
    assert line.split()[1:6] == ["-", "-", "done", "-", "done"] and "math500 pass@1 = 0.750" in line
    plain = CellReport("gt_grpo__tiny__tiny", str(tmp_path / "none"), steps={"train": "done"})
    assert "audit" not in format_report(PipelineReport("demo", [plain])).splitlines()[0]  # the demo's table as before
