"""run_folder: the names inside runs/<cell_id>/ and the functions that list them, on real folders."""

from __future__ import annotations

from pathlib import Path

from corewarding import run_folder


def test_step_folders_are_listed_in_numeric_order_and_other_names_are_not_steps(tmp_path: Path) -> None:
    checkpoints = run_folder.checkpoints_dir(tmp_path)
    for name in ("global_step_10", "global_step_2", ".tmp_global_step_12", "global_step_x", "hf"):
        (checkpoints / name).mkdir(parents=True)
    (checkpoints / "global_step_3").write_text("a file, not a save")
    (checkpoints / run_folder.LATEST).write_text("global_step_10")

    assert run_folder.step_dirs(checkpoints) == {2: checkpoints / "global_step_2", 10: checkpoints / "global_step_10"}
    assert run_folder.step_dir(checkpoints, 10) == checkpoints / "global_step_10"
    assert run_folder.step_dirs(tmp_path / "missing") == {}


def test_every_file_of_a_run_resolves_under_its_folder(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "gt_grpo__tiny__tiny"
    assert run_folder.config_file(run) == run / "config.yaml"
    assert run_folder.record_file(run) == run / "run.json"
    assert run_folder.metrics_file(run) == run / "metrics.jsonl"
    assert run / run_folder.EVAL_METRICS == run / "eval" / "metrics.parquet"
    assert run_folder.merged_dir(run, 4) == run / "hf" / "global_step_4"
    assert run_folder.publish_dir(run, 4) == run / "publish" / "global_step_4"
    assert run_folder.step_of(run_folder.step_name(40)) == 40


def _save(checkpoints: Path, step: int, layout: str, complete: bool = True) -> Path:
    """A checkpoint folder of one backend, complete or not: local ``model/config.json``, verl ``actor/fsdp_config.json``
    (verl writes it last, so an actor folder without it is a save cut short)."""
    folder = run_folder.step_dir(checkpoints, step) / layout
    folder.mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(b"weights")
    if complete:
        marker = run_folder.HF_CONFIG if layout == run_folder.LOCAL_MODEL else run_folder.VERL_DONE
        (folder / marker).write_text("{}")
    return folder


def test_saved_checkpoints_lists_complete_steps_of_both_backends(tmp_path: Path) -> None:
    checkpoints = run_folder.checkpoints_dir(tmp_path)
    local_2 = _save(checkpoints, 2, run_folder.LOCAL_MODEL)
    verl_10 = _save(checkpoints, 10, run_folder.VERL_ACTOR)
    _save(checkpoints, 4, run_folder.LOCAL_MODEL, complete=False)  # no config.json: not a saved model
    _save(checkpoints, 6, run_folder.VERL_ACTOR, complete=False)  # no fsdp_config.json: verl stopped mid-save
    both = _save(checkpoints, 8, run_folder.LOCAL_MODEL)
    _save(checkpoints, 8, run_folder.VERL_ACTOR)
    (checkpoints / ".tmp_global_step_12" / run_folder.LOCAL_MODEL).mkdir(parents=True)  # a save being written

    saved = run_folder.saved_checkpoints(checkpoints)
    assert saved == {2: local_2, 8: both, 10: verl_10}
    assert list(saved) == [2, 8, 10]  # ascending
    assert run_folder.verl_steps(checkpoints) == [8, 10]
    assert run_folder.saved_checkpoints(tmp_path / "missing") == {}
    assert run_folder.verl_steps(tmp_path / "missing") == []
