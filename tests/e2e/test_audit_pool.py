"""`corewarding audit --work-pool`: the released checkpoints audited as flow runs of the cell deployment on a work
pool, like training cells. A real Prefect server, one process worker in its own checkout (another "machine") that
reaches the local Hub-API server, a local DVC remote as the shared store; the parent gets the scores back through the
store and ingests them with source 'released'."""

from __future__ import annotations

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
from tests.support.prefect_server import kill_tree, prefect_server
from tests.support.repo import clone_project, dvc_bin, run_dvc

BIN = Path(sys.executable).parent
CELLS = [Cell(m, "qwen3-4b-base", "math") for m in ("gt_grpo", "co_rewarding_2")]
CELL_IDS = ",".join(c.cell_id for c in CELLS)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_an_audit_on_a_work_pool_runs_one_flow_run_per_checkpoint_on_the_worker(
    artifacts_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not dvc_bin().exists():
        pytest.skip("dvc is not installed in this environment")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)  # tests/conftest.py sets offline mode
    model = build_tiny_model(artifacts_dir / "tiny-model-sft300", sft_steps=300)
    parent = clone_project(tmp_path / "parent")
    run_dvc(parent, "remote", "add", "--local", "shared", str(tmp_path / "remote"))
    (tmp_path / "remote").mkdir()
    worker_checkout = clone_project(tmp_path / "w1")
    write_tiny_dataset(worker_checkout / "artifacts" / "tiny-data", n_train=64, n_test=16, seed=0)
    (tmp_path / "server-home").mkdir()
    with HubServer() as hub, prefect_server(tmp_path / "server-home", auth="corewarding:pool-secret") as prefect_env:
        api = HfApi(endpoint=hub.url, token="hf_test")
        for cell in CELLS:
            api.create_repo(hub_repo_id(cell), exist_ok=True)
            api.upload_folder(repo_id=hub_repo_id(cell), folder_path=str(model), allow_patterns=HUB_FILES)
        env = {**prefect_env, "HF_ENDPOINT": hub.url, "HF_HUB_OFFLINE": "0", "HF_HOME": str(tmp_path / "hf")}
        deploy = [str(BIN / "corewarding"), "deploy", "--work-pool", "cpu-pool", "--root", str(parent)]
        subprocess.run(deploy, env=env, cwd=parent, check=True, capture_output=True, timeout=300)
        worker = subprocess.Popen(
            [str(BIN / "corewarding"), "worker", "--pool", "cpu-pool", "--limit", "1", "--name", "w1",
             "--store", str(tmp_path / "remote" / "corewarding")],  # the parent's store: the DVC remote's
            env={**env, "COREWARDING_ROOT": str(worker_checkout), "COREWARDING_WORKER": "w1"},
            cwd=worker_checkout, stdout=(tmp_path / "w1.log").open("w"), stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        try:
            audit = subprocess.run(
                [str(BIN / "corewarding"), "audit", "--matrix", "paper_v3", "--cell", CELL_IDS, "--benchmarks", "tiny",
                 "--generation", "transformers", "--work-pool", "cpu-pool",
                 "--config", "store.dvc_remote=shared", "--config", f"results_db={tmp_path / 'results.duckdb'}",
                 "benchmark.limit=4", "math_verify.workers=1", "bootstrap.samples=200"],
                env=env, cwd=parent, capture_output=True, text=True, timeout=500,
            )  # fmt: skip
        finally:
            kill_tree(worker.pid)
    log = (tmp_path / "w1.log").read_text()
    assert audit.returncode == 0, audit.stderr[-3000:] + log[-3000:]
    for cell in CELLS:  # each checkpoint was a flow run the worker took, named after its cell
        assert cell.cell_id in log
        assert (parent / "runs" / cell.cell_id / "released" / "audit.json").is_file()  # back through the store
    with duckdb.connect(str(tmp_path / "results.duckdb"), read_only=True) as con:
        stored = con.execute(
            "SELECT run_id, count(*) FROM eval_metrics WHERE source = 'released' GROUP BY run_id ORDER BY run_id"
        ).fetchall()
    assert stored == [(f"released/{c.cell_id}", 6) for c in sorted(CELLS, key=lambda c: c.cell_id)]
