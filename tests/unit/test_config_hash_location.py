"""The training-config hash ignores where ``paths.*`` point (issue 41): a run folder moved with its artifacts to
another mount point resumes on both backends, another training setting or another file name is still another
configuration, a path outside the ``paths.*`` folders counts as it is, and a run folder written by the previous
version (whose hash held the paths) resumes in place for one version."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import Any

import pytest
from omegaconf import DictConfig

from corewarding.config import ConfigError, compose_config
from corewarding.pipeline.cells import plan_cell
from corewarding.pipeline.steps import is_trained, supersede_run
from corewarding.run_folder import RUN_RECORD
from corewarding.training.common import accepted_config_hashes, legacy_training_config_hash, training_config_hash
from corewarding.training.local import trainer as local_trainer
from corewarding.training.local.trainer import LocalTrainer, train
from corewarding.training.run_record import data_files

CELL = "gt_grpo__tiny__tiny"


def cfg_at(root: Path | str, *more: str) -> DictConfig:
    """The tiny two-step cell (a save after each step) with its runs, data and artifacts folders under ``root``."""
    return compose_config([
        "experiment=tiny_cpu", "method=gt_grpo", f"paths.artifacts_dir={root}/artifacts",
        f"paths.runs_dir={root}/runs", f"paths.data_dir={root}/data", "schedule.total_steps=2",
        "schedule.save_freq=1", "schedule.val_max_samples=4", *more,
    ])  # fmt: skip


def move(old_root: Path, new_root: Path) -> None:
    """Move the run and artifacts folders as a new mount point would: nothing is left at the old place."""
    for name in ("runs", "artifacts"):
        (new_root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.move(old_root / name, new_root / name)
    assert not (old_root / "runs").exists() and not (old_root / "artifacts").exists()


# ---- the hash ------------------------------------------------------------------------------------------------------
def test_the_hash_ignores_where_the_paths_folders_are_but_not_what_they_hold(tmp_path: Path) -> None:
    here = cfg_at("/mnt/a")
    elsewhere = cfg_at("/scratch/x/y/z")
    relative = compose_config(["experiment=tiny_cpu", "method=gt_grpo", "schedule.total_steps=2",
                               "schedule.save_freq=1", "schedule.val_max_samples=4"])  # fmt: skip
    assert here.base_model.path != elsewhere.base_model.path  # the resolved config does name the folder
    assert training_config_hash(here) == training_config_hash(elsewhere) == training_config_hash(relative)
    assert legacy_training_config_hash(here) != legacy_training_config_hash(elsewhere)  # what issue 41 found
    assert accepted_config_hashes(here) == (training_config_hash(here), legacy_training_config_hash(here))
    # a value written out in full under the folder, not interpolated, is the same artifact
    spelled = cfg_at("/scratch/x/y/z", "base_model.path=/scratch/x/y/z/artifacts/tiny-model-sft0")
    assert training_config_hash(spelled) == training_config_hash(here)
    # what the artifact is still counts: another file name, another training setting
    assert training_config_hash(cfg_at("/mnt/a", "dataset.val_files=/mnt/a/artifacts/tiny-data/t2.parquet")) != (
        training_config_hash(here)
    )
    assert training_config_hash(cfg_at("/mnt/a", "base_model.tiny.sft_steps=3")) != training_config_hash(here)
    assert training_config_hash(cfg_at("/scratch/x/y/z", "optimizer.lr=2.5e-4")) != training_config_hash(here)
    # the exclusions it always had: threads, the Hub, verl-only settings
    same = cfg_at("/scratch/x/y/z", "torch_threads=3", "hub.org=someone", "verl.n_gpus_per_node=2")
    assert training_config_hash(same) == training_config_hash(here)


def test_the_data_folder_counts_by_name_too() -> None:
    def math_at(root: str, *more: str) -> DictConfig:
        return compose_config(["dataset=math", f"paths.data_dir={root}", *more])

    assert training_config_hash(math_at("/mnt/a/data")) == training_config_hash(math_at("/lustre/p7/shared-data"))
    assert training_config_hash(math_at("/mnt/a/data")) != training_config_hash(
        math_at("/mnt/a/data", "dataset.rephrased_source=generate")
    )


def test_a_path_outside_the_paths_folders_counts_as_it_is() -> None:
    mine, theirs = "base_model.path=/opt/models/mine-7b", "base_model.path=/opt/models/theirs-3b"
    assert training_config_hash(cfg_at("/mnt/a", mine)) == training_config_hash(cfg_at("/scratch/q", mine))
    assert training_config_hash(cfg_at("/mnt/a", mine)) != training_config_hash(cfg_at("/mnt/a", theirs))
    # a folder outside that happens to share a root's name is not under it
    assert training_config_hash(cfg_at("/mnt/a", "base_model.path=/mnt/a/artifacts-old/m")) != (
        training_config_hash(cfg_at("/scratch/q", "base_model.path=/scratch/q/artifacts-old/m"))
    )


# ---- local backend: a moved run resumes ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A root holding ``runs/`` (the two-step run, saves at steps 1 and 2) and ``artifacts/`` (its tiny model and
    data, built there); never changed, each test moves its own copy."""
    root = tmp_path_factory.mktemp("mount-a")
    train(cfg_at(root), progress=False)
    return root


@pytest.fixture()
def copied(trained: Path, tmp_path: Path) -> Path:
    shutil.copytree(trained, tmp_path / "a")
    return tmp_path / "a"


def test_a_local_run_moved_with_its_artifacts_resumes_from_its_saved_step(
    copied: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    old_run = copied / "runs" / CELL
    shutil.rmtree(old_run / "checkpoints" / "global_step_2")  # stopped after the save of step 1
    metrics = (old_run / "metrics.jsonl").read_text().splitlines()
    step_1 = next(line for line in metrics if json.loads(line)["step"] == 1)
    started_at = json.loads((old_run / RUN_RECORD).read_text())["started_at"]
    new_root = tmp_path / "b" / "other-mount"
    move(copied, new_root)
    new_run = new_root / "runs" / CELL

    with caplog.at_level(logging.INFO, logger="corewarding.training.local.trainer"):
        train(cfg_at(new_root), progress=False)

    assert f"resumed {new_run} from step 1" in caplog.text
    lines = (new_run / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in lines] == [0, 1, 2]
    assert lines[1] == step_1  # step 1 was not trained again (its step_seconds would differ)
    record = json.loads((new_run / RUN_RECORD).read_text())
    assert record["status"] == "finished" and record["started_at"] == started_at and len(record["resumed_at"]) == 1
    assert (new_run / "checkpoints" / "global_step_2" / "trainer_state.json").is_file()


def test_a_moved_local_run_under_another_setting_is_still_refused(copied: Path, tmp_path: Path) -> None:
    new_root = tmp_path / "b"
    move(copied, new_root)
    with pytest.raises(ConfigError, match="holds checkpoints of another configuration"):
        LocalTrainer(cfg_at(new_root, "optimizer.lr=2.5e-4"), new_root / "runs" / CELL, progress=False)


# ---- local backend: a run folder of the previous version ------------------------------------------------------------
def test_a_local_run_of_the_previous_version_resumes_in_place_and_only_there(
    trained: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    old = tmp_path / "old"
    shutil.copytree(trained / "artifacts", old / "artifacts")
    with monkeypatch.context() as patch:  # the previous version's trainer
        patch.setattr(local_trainer, "training_config_hash", legacy_training_config_hash)
        train(cfg_at(old, "schedule.total_steps=1"), progress=False)
    state = json.loads((old / "runs" / CELL / "checkpoints" / "global_step_1" / "trainer_state.json").read_text())
    assert state["config_hash"] == legacy_training_config_hash(cfg_at(old, "schedule.total_steps=1"))
    assert state["config_hash"] != training_config_hash(cfg_at(old, "schedule.total_steps=1"))

    started_at = json.loads((old / "runs" / CELL / RUN_RECORD).read_text())["started_at"]
    with caplog.at_level(logging.INFO, logger="corewarding.training.local.trainer"):
        train(cfg_at(old, "schedule.total_steps=1"), progress=False)
    assert f"resumed {old / 'runs' / CELL} from step 1" in caplog.text
    record = json.loads((old / "runs" / CELL / RUN_RECORD).read_text())  # the same run, its first start kept
    assert record["started_at"] == started_at and len(record["resumed_at"]) == 1

    moved = tmp_path / "moved"
    move(old, moved)  # the old hash held the old folder: resume it once in place before moving it
    with pytest.raises(ConfigError, match="holds checkpoints of another configuration"):
        LocalTrainer(cfg_at(moved, "schedule.total_steps=1"), moved / "runs" / CELL, progress=False)


# ---- verl backend: prepare's check ---------------------------------------------------------------------------------
def test_verl_prepare_resumes_a_moved_run_and_refuses_another_setting(trained: Path, tmp_path: Path) -> None:
    pytest.importorskip("verl")
    from corewarding.training.verl.launch import launch, prepare

    a = tmp_path / "a"
    shutil.copytree(trained / "artifacts", a / "artifacts")
    verl = ("backend=verl", "verl.n_gpus_per_node=1")
    cfg = cfg_at(a, *verl)
    run = launch(cfg)
    prepare(cfg, run.verl_config, run.run_dir)
    (run.run_dir / "checkpoints").mkdir()
    (run.run_dir / "checkpoints" / "latest_checkpointed_iteration.txt").write_text("1")
    written = (run.run_dir / "config_hash").read_text().strip()

    b = tmp_path / "b" / "c"
    move(a, b)
    moved = cfg_at(b, *verl)
    run_b = launch(moved)
    assert run_b.run_dir == (b / "runs" / CELL).resolve()
    prepare(moved, run_b.verl_config, run_b.run_dir)  # resumes: no refusal
    assert (run_b.run_dir / "config_hash").read_text().strip() == written

    other = cfg_at(b, *verl, "grpo.n=3")
    with pytest.raises(ConfigError, match="holds checkpoints of another configuration"):
        prepare(other, launch(other).verl_config, run_b.run_dir)

    # the previous version's hash file: accepted (and rewritten) in place; a hash of neither formula is refused
    (run_b.run_dir / "config_hash").write_text(legacy_training_config_hash(moved) + "\n")
    prepare(moved, run_b.verl_config, run_b.run_dir)
    assert (run_b.run_dir / "config_hash").read_text().strip() == training_config_hash(moved)
    (run_b.run_dir / "config_hash").write_text(legacy_training_config_hash(cfg_at(a, *verl)) + "\n")
    with pytest.raises(ConfigError, match="holds checkpoints of another configuration"):
        prepare(moved, run_b.verl_config, run_b.run_dir)


# ---- the pipeline and the run record: the previous version's hash -------------------------------------------------
def test_the_pipeline_keeps_a_run_recorded_under_the_previous_hash(tmp_path: Path) -> None:
    plan = plan_cell("demo", CELL, [f"paths.runs_dir={tmp_path / 'runs'}", f"paths.artifacts_dir={tmp_path / 'art'}"])
    plan.run_dir.mkdir(parents=True)
    record = {"status": "finished", "config_hash": legacy_training_config_hash(plan.cfg)}
    (plan.run_dir / RUN_RECORD).write_text(json.dumps({**record, "data_files": data_files(plan.cfg)}))
    assert is_trained(plan)  # not trained again
    (plan.run_dir / RUN_RECORD).write_text(json.dumps({**record, "status": "interrupted"}))
    assert supersede_run(plan) is None and plan.run_dir.is_dir()  # resumed, not moved aside
    (plan.run_dir / RUN_RECORD).write_text(json.dumps({**record, "config_hash": "0123456789abcdef"}))
    assert not is_trained(plan)
    moved_to = supersede_run(plan)  # another configuration's finished run: moved aside, as before
    assert moved_to is not None and moved_to.name == f"{CELL}-0123456789abcdef"


def test_the_pipeline_keeps_a_finished_run_whose_data_moved_but_not_one_whose_data_changed(tmp_path: Path) -> None:
    def plan_at(root: Path, text: str) -> Any:
        plan = plan_cell("demo", CELL, [f"paths.runs_dir={tmp_path / 'runs'}", f"paths.artifacts_dir={root}"])
        for role, body in (("train", text), ("val", text[::-1])):  # the files the cell reads, made here
            path = Path(str(plan.cfg.dataset[f"{role}_files"]))
            assert path.is_relative_to(root), path
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(body)
        return plan

    before = plan_at(tmp_path / "mount-a", "2+3=5\n7*6=42\n")
    before.run_dir.mkdir(parents=True)
    record = {
        "status": "finished",
        "config_hash": training_config_hash(before.cfg),
        "data_files": data_files(before.cfg),
    }
    (before.run_dir / RUN_RECORD).write_text(json.dumps(record))
    assert set(record["data_files"]) == {"train", "val"} and is_trained(before)
    assert is_trained(plan_at(tmp_path / "mount-b", "2+3=5\n7*6=42\n"))  # the same bytes elsewhere: not retrained
    assert not is_trained(plan_at(tmp_path / "mount-c", "2+3=5\n7*6=43\n"))  # other bytes: trained again
