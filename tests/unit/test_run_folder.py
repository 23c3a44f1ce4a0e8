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
