"""Synthetic run folders, evaluation files and quality reports in the real on-disk formats.

For tests, the dashboard benchmark and a look at the dashboard before any real run exists. Every generated run says
``backend: synthetic``. Trajectories follow methods.md section 10 (the self-rewarding baselines collapse:
Majority-Voting earns reward 1 on wrong labels, Entropy runs to the length cap; Co-rewarding-I collapses on DAPO-14k;
GT and Co-rewarding-II stay stable) and the final evaluations sit near the paper's numbers, so every page has content.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd
from omegaconf import OmegaConf

from corewarding.matrix import SEED_KEY, Cell, hub_repo_id
from corewarding.results.names import PAPER_BENCHMARKS, benchmark_key
from corewarding.results.reference import load_reference
from corewarding.run_folder import (
    EVAL_METRICS as EVAL_METRICS_FILE,
)
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
from corewarding.settings_diff import settings_json, settings_key

BENCHMARKS = PAPER_BENCHMARKS  # the paper's columns, in their canonical spelling (names.py)
EVAL_METRICS = ("pass@1", "avg@8", "pass@8", "maj@8")
BASE_METRICS = (
    "reward_mean",
    "label_accuracy",
    "nonempty_label_rate",
    "vote_agreement",
    "response_length_mean",
    "truncation_rate",
    "entropy_mean",
    "kl_mean",
    "pg_loss",
    "clipfrac",
    "grad_norm",
    "lr",
    "ema_rate",
    "step_seconds",
    "epoch",
)


@dataclass(frozen=True)
class SyntheticSpec:
    """Sizes of a generated result set."""

    steps: int = 30
    metrics: int = 20  # per training step, val_accuracy included
    test_freq: int = 5
    eval_every: int = 10
    samples_per_benchmark: int = 16  # at the last evaluated step, 8 samples per problem
    max_response_length: int = 3072


def _collapses(cell: Cell) -> str | None:
    """Which collapse a cell shows: None (stable), 'vote', 'length' or 'val'."""
    if cell.method == "majority_voting" or (cell.method == "co_rewarding_1" and cell.dataset == "dapo14k"):
        return "vote"
    return {"entropy": "length", "self_certainty": "val"}.get(cell.method)


def training_metrics(cell: Cell, spec: SyntheticSpec, seed: int) -> list[dict[str, float | int | None]]:
    """Per-step metrics like the local trainer's (step 0 holds validation only)."""
    rng = np.random.default_rng(seed)
    kind = _collapses(cell)
    t = np.arange(1, spec.steps + 1) / spec.steps
    fall = np.clip((t - 0.35) / 0.3, 0, 1) if kind else np.zeros_like(t)
    val = 0.35 + 0.3 * np.minimum(t / 0.35, 1) - 0.6 * fall
    label = 0.45 + 0.3 * t - (0.7 * fall if kind == "vote" else 0)
    reward = np.minimum(0.55 + 0.15 * t + (0.5 * fall if kind == "vote" else 0), 1.0)  # votes agree on wrong labels
    length = spec.max_response_length * (0.3 + 0.2 * t + (0.6 * fall if kind == "length" else 0))
    rows: list[dict[str, float | int | None]] = [{"step": 0, "val_accuracy": 0.35}]
    for i, step in enumerate(range(1, spec.steps + 1)):
        row: dict[str, float | int | None] = {"step": step, "epoch": (step - 1) // max(1, spec.steps // 3)}
        noise = rng.normal(0, 0.01, 8)
        row.update(
            reward_mean=float(reward[i] + noise[0] if kind != "vote" else reward[i]),
            label_accuracy=float(np.clip(label[i] + noise[1], 0, 1)),
            nonempty_label_rate=float(np.clip(0.95 + noise[2], 0, 1)),
            vote_agreement=float(np.clip(0.5 + 0.4 * t[i] + noise[3], 0, 1)),
            response_length_mean=float(min(length[i] * (1 + noise[4]), spec.max_response_length)),
            truncation_rate=float(np.clip(length[i] / spec.max_response_length - 0.4, 0, 1)),
            entropy_mean=float(0.8 - 0.5 * t[i] + noise[5]),
            kl_mean=float(0.002 * step),
            pg_loss=float(noise[6]),
            clipfrac=float(abs(noise[7])),
            grad_norm=float(0.3 + abs(noise[0])),
            lr=3e-6,
            ema_rate=0.01 if cell.method == "co_rewarding_2" else None,
            step_seconds=float(60 + 10 * abs(noise[1])),
        )
        for k in range(spec.metrics - len(BASE_METRICS) - 1):
            row[f"extra_{k:02d}"] = float(k + noise[k % 8])
        if step % spec.test_freq == 0 or step == spec.steps:
            row["val_accuracy"] = float(np.clip(val[i] + noise[2], 0, 1))
        rows.append(row)
    return rows


@cache
def _reference() -> pd.DataFrame:
    """The paper's numbers, read once (not once per generated run); never modified."""
    return load_reference()


def _paper_values(cell: Cell) -> dict[str, tuple[float, float]]:
    """benchmark -> (base, trained) fractions from the paper where it has the cell, else generic values."""
    ref = _reference()
    mine = ref[(ref["base_model"] == cell.base_model) & (ref["dataset"] == cell.dataset)]
    out = {}
    for bench in BENCHMARKS:
        rows = mine[mine["benchmark_key"] == benchmark_key(bench)]
        base = rows[rows["method"] == "base"]["value"]
        trained = rows[rows["method"] == cell.method]["value"]
        b = float(base.iloc[0]) / 100 if len(base) else 0.3
        out[bench] = (b, float(trained.iloc[0]) / 100 if len(trained) else min(b + 0.1, 1.0))
    return out


def eval_metrics(cell: Cell, spec: SyntheticSpec, seed: int) -> pd.DataFrame:
    """eval/metrics.parquet rows: the base model (step null) and every ``eval_every`` steps."""
    rng = np.random.default_rng(seed + 1)
    values = _paper_values(cell)
    steps: list[int | None] = [None, *range(spec.eval_every, spec.steps + 1, spec.eval_every)]
    rows = []
    for step in steps:
        frac = 0.0 if step is None else step / spec.steps
        dip = 0.5 * max(0.0, frac - 0.6) if _collapses(cell) else 0.0
        for bench, (base, trained) in values.items():
            for checker in ("strict", "math_verify"):
                lift = 0.0 if checker == "strict" else 0.01
                center = float(np.clip(base + (trained - base) * min(frac / 0.6, 1) - dip + lift, 0, 1))
                for metric in EVAL_METRICS:
                    bump = {"pass@1": 0.0, "avg@8": 0.0, "pass@8": 0.15, "maj@8": 0.05}[metric]
                    v = float(np.clip(center + bump + rng.normal(0, 0.005), 0, 1))
                    rows.append(
                        {
                            "step": step,
                            "benchmark": bench,
                            "checker": checker,
                            "metric": metric,
                            "value": v,
                            "ci_low": max(v - 0.02, 0.0),
                            "ci_high": min(v + 0.02, 1.0),
                            "n": 8,
                            "num_problems": 500,
                            "temperature": 0.8,
                            "seed": 0,
                            "model_revision": "synthetic",
                            **synthetic_settings(checker),
                        }
                    )
    frame = pd.DataFrame(rows)
    frame["step"] = frame["step"].astype("Int64")
    return frame


SYNTHETIC_CHECKER_VERSION = "synthetic"  # every synthetic verdict's checker version, on its samples and its scores


def synthetic_settings(checker: str) -> dict[str, str]:
    """The ``settings`` and ``settings_key`` columns of a synthetic score: the paper's protocol on vLLM."""
    settings = {
        "generation_backend": "vllm", "generation_version": "synthetic", "tensor_parallel_size": 1,
        "dtype": "bfloat16", "batch_size": None, "temperature": 0.8, "top_p": 1.0, "n": 8, "max_new_tokens": 3072,
        "seed": 0, "chat_template_sha256": None, "prompt": "synthetic", "checker_tool": checker,
        "checker_version": SYNTHETIC_CHECKER_VERSION, "benchmark_sha256": None, "model_revision": "synthetic",
    }  # fmt: skip
    return {"settings": settings_json(settings), "settings_key": settings_key(settings)}


def eval_samples(cell: Cell, spec: SyntheticSpec, seed: int) -> pd.DataFrame:
    """eval/samples.parquet rows at the last evaluated step: 8 samples per problem."""
    rng = np.random.default_rng(seed + 2)
    step = spec.steps - spec.steps % spec.eval_every
    n = spec.samples_per_benchmark
    problems = np.arange(n) // 8
    frames = []
    for bench in BENCHMARKS:
        answers = rng.integers(0, 50, n)
        correct = rng.random(n) < 0.6
        gold = [str(a if c else a + 1) for a, c in zip(answers, correct, strict=True)]
        truncated = rng.random(n) < 0.05
        length = rng.integers(100, spec.max_response_length, n)
        body = [
            f"Step by step for {bench} problem {p}: " + "we simplify. " * int(k % 20)
            for p, k in zip(problems, length, strict=True)
        ]
        frames.append(
            pd.DataFrame(
                {
                    "step": step,
                    "benchmark": bench,
                    "problem_id": [f"{bench.lower()}-{p}" for p in problems],
                    "sample_index": np.arange(n) % 8,
                    "question": [f"Problem {p} of {bench}: what is x? Put it in \\boxed{{}}." for p in problems],
                    "gold": gold,
                    "response": [
                        b + ("" if t else f"So the answer is \\boxed{{{a}}}.")
                        for b, t, a in zip(body, truncated, answers, strict=True)
                    ],
                    "extracted_answer": [None if t else str(a) for t, a in zip(truncated, answers, strict=True)],
                    "correct_strict": correct & ~truncated,
                    "correct_math_verify": (correct | (rng.random(n) < 0.2)) & ~truncated,  # checkers disagree
                    "checker_version_strict": SYNTHETIC_CHECKER_VERSION,
                    "checker_version_math_verify": SYNTHETIC_CHECKER_VERSION,
                    "length": length,
                    "truncated": truncated,
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


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
