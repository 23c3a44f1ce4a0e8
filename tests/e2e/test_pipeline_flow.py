"""The Prefect pipeline end to end on CPU, in a git + DVC copy of the project: data through `dvc repro`, three tiny
cells (one broken) trained, evaluated, ingested into DuckDB and published as folders; DVC stages recorded; a rerun
that skips what is done and resumes an interrupted training; a hyperparameter change that marks only its cells."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
import yaml

from tests.support.prefect_server import prefect_harness
from tests.support.repo import clone_project, dvc_bin, run_dvc

GOOD = ["gt_grpo__tiny__tiny", "majority_voting__tiny__tiny"]
BROKEN = "co_rewarding_2__tiny__tiny"


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A clone of the project as the working directory, and an isolated Prefect (one test harness server)."""
    if not dvc_bin().exists():
        pytest.skip("dvc is not installed in this environment")
    clone = clone_project(tmp_path_factory.mktemp("flow"))
    with pytest.MonkeyPatch.context() as patch, prefect_harness(tmp_path_factory.mktemp("prefect")):
        patch.chdir(clone)
        yield clone


def _run(**parameters: object):  # type: ignore[no-untyped-def]
    from flows.pipeline import pipeline

    return pipeline(**parameters, return_state=True)


@pytest.mark.slow
@pytest.mark.timeout(600)  # two pipeline runs and a dvc repro (about 90 s here)
def test_pipeline_runs_the_good_cells_reports_the_broken_one_records_dvc_and_a_rerun_resumes(project: Path) -> None:
    """One test, two phases: the rerun works on the first run's folders (two tests sharing a module's state could
    run on two pytest workers, each with its own copy)."""
    _first_run_runs_the_good_cells_reports_the_broken_one_and_records_dvc(project)
    _a_rerun_skips_what_is_done_and_resumes_an_interrupted_training(project)


def _first_run_runs_the_good_cells_reports_the_broken_one_and_records_dvc(project: Path) -> None:
    # An I/O failure in one cell: its run folder cannot be created (a file is in the way).
    (project / "runs").mkdir()
    (project / "runs" / BROKEN).write_text("not a folder")
    state = _run(cells=[*GOOD, BROKEN])

    assert state.is_failed()
    error = state.result(raise_on_failure=False)
    assert f"1 of 3 cell(s) failed: {BROKEN} (train: " in str(error)
    report = {c.cell_id: c for c in error.report.cells}
    for cell_id in GOOD:
        assert report[cell_id].steps == {"train": "done", "evaluate": "done", "ingest": "done", "publish": "done"}
    assert report[BROKEN].steps == {"train": "failed", "evaluate": "not run", "ingest": "not run", "publish": "not run"}
    assert error.report.data_stages == ["tiny_data"]

    # Data came through DVC; every saved step was evaluated; both good runs and their evaluations are in DuckDB.
    lock = (project / "dvc.lock").read_text()
    assert "tiny_data:" in lock and f"train@{GOOD[0]}:" in lock and f"evaluate@{GOOD[1]}:" in lock
    assert f"train@{BROKEN}" not in lock
    with duckdb.connect(str(project / "results/results.duckdb"), read_only=True) as con:
        runs = dict(con.execute("SELECT cell_id, status FROM runs").fetchall())
        steps = con.execute("SELECT DISTINCT step FROM eval_metrics ORDER BY step").fetchall()
        samples = con.execute("SELECT count(*) FROM eval_samples").fetchone()
    assert runs == dict.fromkeys(GOOD, "finished")
    assert [s[0] for s in steps] == [4, 8, 12] and samples == (2 * 3 * 16 * 4,)

    # The publish folder of each good cell: weights, tokenizer and a model card, nothing pushed.
    for cell_id in GOOD:
        folders = list((project / "runs" / cell_id / "publish").iterdir())
        assert [f.name for f in folders] == ["global_step_12"]
        names = {p.name for p in folders[0].iterdir()}
        assert {"README.md", "config.json", "model.safetensors", "tokenizer.json"} <= names

    # dvc status: the recorded stages are up to date; one method's hyperparameter marks only that method's cells.
    recorded = [f"{kind}@{cell}" for cell in GOOD for kind in ("train", "evaluate")]
    assert "up to date" in run_dvc(project, "status", *recorded)
    method = project / "configs/method/majority_voting.yaml"
    method.write_text(method.read_text().replace("data_seed: 1234", "data_seed: 4321"))
    status = run_dvc(project, "status", *recorded)
    assert f"train@{GOOD[1]}:" in status and GOOD[0] not in status

    # `dvc repro` alone retrains and re-evaluates exactly that cell; the earlier run is kept aside.
    before = _metrics(project / "runs" / GOOD[1])
    rerun = run_dvc(project, "repro", *recorded)
    assert f"Running stage 'train@{GOOD[1]}'" in rerun and f"Running stage 'evaluate@{GOOD[1]}'" in rerun
    assert GOOD[0] not in rerun.replace(f"'evaluate@{GOOD[0]}' didn't change", "").replace(
        f"'train@{GOOD[0]}' didn't change", ""
    )
    assert _metrics(project / "runs" / GOOD[1]) != before  # another data order, other numbers
    superseded = list((project / "runs/.superseded").iterdir())
    assert [p.name.split("-")[0] for p in superseded] == [GOOD[1]] and (superseded[0] / "eval").is_dir()
    assert "up to date" in run_dvc(project, "status", *recorded)


def _metrics(run: Path) -> list[dict[str, object]]:
    """Each step's metrics without its wall-clock time."""
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in row.items() if k != "step_seconds"} for row in rows]


def _a_rerun_skips_what_is_done_and_resumes_an_interrupted_training(project: Path) -> None:
    run = project / "runs" / GOOD[0]
    full_metrics = _metrics(run)
    # As a run killed after its step-8 checkpoint leaves it: no step-12 checkpoint, metrics past step 8, "running".
    shutil.rmtree(run / "checkpoints/global_step_12")
    (run / "checkpoints/latest").write_text("global_step_8")
    record = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**record, "status": "running", "ended_at": None}))
    eval_stamp = (run / "eval/pipeline.json").stat().st_mtime_ns
    os.remove(project / "runs" / BROKEN)
    # As a run stopped by Ctrl-C after training the other cell but before recording it leaves dvc.lock.
    lock = yaml.safe_load((project / "dvc.lock").read_text())
    del lock["stages"][f"train@{GOOD[1]}"]
    (project / "dvc.lock").write_text(yaml.safe_dump(lock, sort_keys=False))

    state = _run(cells=GOOD, steps=["train", "evaluate", "ingest"])

    assert state.is_completed(), state.message
    result = state.result()
    report = {c["cell_id"]: c["steps"] for c in result["cells"]}
    # The resumed cell trains from step 9 and its re-saved step 12 is evaluated again; the other cell (retrained by
    # dvc repro above) has nothing left to do but the ingestion of its new files.
    assert report[GOOD[0]] == {"train": "done", "evaluate": "done", "ingest": "done"}
    assert report[GOOD[1]] == {"train": "skipped", "evaluate": "skipped", "ingest": "done"}
    assert _metrics(run) == full_metrics  # resumed at step 9: the same numbers
    assert json.loads((run / "run.json").read_text())["status"] == "finished"
    assert (run / "eval/pipeline.json").stat().st_mtime_ns != eval_stamp
    # What ran now, and the skipped training that the stopped run never recorded.
    assert result["dvc_recorded"] == [f"train@{GOOD[0]}", f"train@{GOOD[1]}", f"evaluate@{GOOD[0]}"]
    recorded = [f"{kind}@{cell}" for cell in GOOD for kind in ("train", "evaluate")]
    assert "up to date" in run_dvc(project, "status", *recorded)

    again = _run(cells=GOOD, steps=["train", "evaluate", "ingest"]).result()
    assert {c["cell_id"]: set(c["steps"].values()) for c in again["cells"]} == {c: {"skipped"} for c in GOOD}
    assert again["dvc_recorded"] == []
