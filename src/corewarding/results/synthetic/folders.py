"""Synthetic result sets on disk, in the real formats: run folders as the trainer and evaluator leave them (with
``values``' numbers), the Hub push records of ``corewarding publish``, and data-quality reports."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from omegaconf import OmegaConf

from corewarding.matrix import SEED_KEY, Cell, hub_repo_id
from corewarding.results.synthetic.values import SyntheticSpec, eval_metrics, eval_samples, training_metrics
from corewarding.run_folder import EVAL_METRICS as EVAL_METRICS_FILE
from corewarding.run_folder import (
    EVAL_SAMPLES,
    LATEST,
    PUSH_RECORD,
    checkpoints_dir,
    config_file,
    eval_dir,
    metrics_file,
    publish_dir,
    record_file,
    step_dir,
    step_name,
)


def write_run(run_dir: Path, cell: Cell, spec: SyntheticSpec, seed: int, status: str = "finished") -> Path:
    """A run folder as the trainer and evaluator leave it: config.yaml, run.json, metrics.jsonl, checkpoints, eval/."""
    run_dir.mkdir(parents=True, exist_ok=True)
    config = {
        "backend": "synthetic",
        "method": {"name": cell.method},
        "base_model": {"name": cell.base_model},
        "dataset": {"name": cell.dataset},
        "hub": {"org": "TMLR-Group-HF"},
        "grpo": {"max_response_length": spec.max_response_length},
        "schedule": {"total_steps": spec.steps, "test_freq": spec.test_freq},
        **({SEED_KEY: cell.seed} if cell.seed else {}),  # a seed cell's config says which seed, as the trainer's does
    }
    config_file(run_dir).write_text(OmegaConf.to_yaml(OmegaConf.create(config)))
    rows = training_metrics(cell, spec, seed)
    last = spec.steps if status == "finished" else spec.steps // 2
    rows = rows[: last + 1]
    metrics_file(run_dir).write_text("".join(json.dumps(r) + "\n" for r in rows))
    ckpt = step_dir(checkpoints_dir(run_dir), last)
    ckpt.mkdir(parents=True, exist_ok=True)
    (ckpt / "trainer_state.json").write_text(
        json.dumps({"step": last, "total_steps": spec.steps, "config_hash": f"{seed:016x}"})
    )
    (checkpoints_dir(run_dir) / LATEST).write_text(ckpt.name)
    day = 1 + seed % 27
    record = {
        "cell_id": cell.cell_id,
        "backend": "synthetic",
        "status": status,
        "started_at": f"2026-10-{day:02d}T08:00:00Z",
        "ended_at": None if status == "running" else f"2026-10-{day:02d}T20:00:00Z",
        "code_version": "0.1.0+gsynthetic",
        "config_hash": f"{seed:016x}",
        "data_files": {"train": {"path": f"data/{cell.dataset}/train.parquet", "sha256": "0" * 64}},
        "error": "RuntimeError: CUDA out of memory (synthetic)" if status == "failed" else None,
    }
    record_file(run_dir).write_text(json.dumps(record, indent=2))
    if status == "finished":
        eval_dir(run_dir).mkdir(exist_ok=True)
        eval_metrics(cell, spec, seed).to_parquet(run_dir / EVAL_METRICS_FILE, index=False)
        eval_samples(cell, spec, seed).to_parquet(run_dir / EVAL_SAMPLES, index=False)
    return run_dir


def write_push_record(run_dir: Path, repo_id: str, step: int) -> Path:
    """The record ``corewarding publish --push`` leaves in ``publish/global_step_N/`` (pushed to the step branch
    and main); the commits are made up."""
    folder = publish_dir(run_dir, step)
    folder.mkdir(parents=True, exist_ok=True)
    pushes = [
        {"repo_id": repo_id, "repo_type": "model", "revision": revision, "commit": f"{step:04x}{i}" + "0" * 35}
        for i, revision in enumerate((step_name(step), "main"))
    ]
    (folder / PUSH_RECORD).write_text(json.dumps({"pushes": pushes}, indent=2))
    return folder


def write_quality_report(path: Path, dataset: str, stage: str, rows_in: int, seed: int) -> Path:
    """A data-quality report in the data issue's format."""
    rng = np.random.default_rng(seed)
    dropped = {"no_boxed_answer": int(rng.integers(1, 9)), "duplicate_question": int(rng.integers(0, 5))}
    report: dict[str, object] = {
        "dataset": dataset,
        "stage": stage,
        "split": "train",
        "source": f"hub:{dataset}",
        "output": str(path.parent),
        "rows_in": rows_in,
        "rows_out": rows_in - sum(dropped.values()),
        "dropped": dropped,
        "dropped_rows": [
            {
                "row": {"problem": f"question {i}"},
                "index": int(i),
                "reason": "no_boxed_answer",
                "detail": "solution has no \\boxed{}",
            }
            for i in range(dropped["no_boxed_answer"])
        ],
        "flagged": {"prompt_too_long": 2},
        "flagged_rows": [
            {"row": 100 + i, "index": 100 + i, "reason": "prompt_too_long", "detail": "530 prompt tokens > 512"}
            for i in range(2)
        ],
        "counts": {"level": {"Level 1": rows_in // 2, "Level 5": rows_in - rows_in // 2}},
    }
    if stage == "rephrase":
        report["rejected"] = {"answer_leaked": 3, "empty_rewrite": 1}
        report["rejected_rows"] = [
            {
                "row": {"problem": f"question {i}"},
                "index": i,
                "reason": "answer_leaked",
                "attempts": 3,
                "action": "kept_original",
                "detail": "rewrite states the answer",
            }
            for i in range(3)
        ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2))
    return path


def write_result_set(
    root: Path, cells: Sequence[Cell], spec: SyntheticSpec, all_finished: bool = False
) -> tuple[Path, Path]:
    """``root/runs/<cell_id>`` for every cell (the 2nd running and the 3rd failed, unless ``all_finished`` or there
    are 4 cells or fewer; every other finished one pushed to the Hub) and ``root/data/<dataset>/*.quality.json``;
    returns (runs folder, data folder)."""
    runs, data = root / "runs", root / "data"
    for i, cell in enumerate(cells):
        mixed = len(cells) > 4 and not all_finished
        status = {1: "running", 2: "failed"}.get(i, "finished") if mixed else "finished"
        write_run(runs / cell.cell_id, cell, spec, seed=i, status=status)
        if status == "finished" and i % 2 == 0:
            write_push_record(runs / cell.cell_id, hub_repo_id(cell), spec.steps)
    for j, dataset in enumerate(sorted({c.dataset for c in cells})):
        write_quality_report(data / dataset / "train.quality.json", dataset, "prepare", 7500, seed=j)
        write_quality_report(data / dataset / "train_rephrased.quality.json", dataset, "rephrase", 7480, seed=j + 10)
    return runs, data
