"""The numbers of synthetic runs: training metrics, evaluation scores and per-sample verdicts (``folders`` writes them).

For tests, the dashboard benchmark and a look at the dashboard before any real run exists. Every generated run says
``backend: synthetic``. Trajectories follow methods.md section 10 (the self-rewarding baselines collapse:
Majority-Voting earns reward 1 on wrong labels, Entropy runs to the length cap; Co-rewarding-I collapses on DAPO-14k;
GT and Co-rewarding-II stay stable) and the final evaluations sit near the paper's numbers, so every page has content.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np
import pandas as pd

from corewarding.eval_rows import SAMPLE_CHECKERS
from corewarding.matrix import Cell
from corewarding.results.names import PAPER_BENCHMARKS, benchmark_key
from corewarding.results.reference import load_reference
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
            for checker in SAMPLE_CHECKERS:
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
