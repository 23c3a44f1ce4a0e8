"""A hand-written store with audited released checkpoints: paper · released · reproduced with hand-picked numbers.

Cell GT (gt_grpo x Qwen3-4B-Base x MATH): the paper prints MATH500 80.00 and GSM8K 90.00 (in two tables); its released
checkpoint is scored on MATH500 under seed 0 (81.23 [78, 84]) and seed 1 (76.50 [74, 79]) and on GSM8K (91 [89, 93]);
two runs: the newer one evaluated at steps 10 and 20 (MATH500 71.23 [68, 74.5] at step 20, seed 0; GSM8K 85 without an
interval or settings), the older one at step 30 (never the one shown). Cell C3 (co_rewarding_3 x Qwen3-4B-Base x
MATH): released only (MATH500 60 [55, 65]), no paper value, no run. Cell GT_3B (gt_grpo x Qwen3-4B-Base x DAPO-14k,
the same method, model family and size): three seeds on MATH500, 70.0, 70.2 and 70.4 (a between-seed sd of 0.2
points, 2 df), whose variance GT's one-seed sides borrow: t(2) sd = 0.86 points, narrower than their problem
intervals, which they keep (the reproduced [68, 74.5] stays), labelled as borrowed, so the verdicts are decisive.
``build(db, seeded_neighbour=False)`` leaves it out: nothing to borrow from.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb

from corewarding.results.store import schema
from corewarding.settings_diff import settings_json, settings_key

GT, C3 = "gt_grpo__qwen3-4b-base__math", "co_rewarding_3__qwen3-4b-base__math"
GT_3B = "gt_grpo__qwen3-4b-base__dapo14k"
NEW_RUN, OLD_RUN = f"{GT}@2026-02-01", f"{GT}@2026-01-01"
PROMPT = "Please reason step by step, and put <b>your final answer</b> within \\boxed{}. " + "x" * 80
SEED0: dict[str, Any] = {
    "generation_backend": "vllm",
    "generation_version": "0.10.1",
    "tensor_parallel_size": 1,
    "dtype": "bfloat16",
    "batch_size": 64,
    "temperature": 0.8,
    "top_p": 0.95,
    "n": 1,
    "max_new_tokens": 3072,
    "seed": 0,
    "chat_template_sha256": "c4a7e3f1d2b8a9e0",
    "prompt": PROMPT,
    "checker_tool": "math_verify",
    "checker_version": "0.8.0",
    "benchmark_sha256": "5e1f" * 16,
    "model_revision": "TMLR-Group-HF/GT-Qwen3-4B-Base-MATH@0a1b2c3",
}
SEED1 = {**SEED0, "seed": 1}
REPRODUCED = {**SEED0, "model_revision": "runs/gt/checkpoints/global_step_20"}  # same protocol, other weights

COLUMNS = "run_id, step, benchmark, benchmark_key, checker, metric, value, ci_low, ci_high, n, source, settings"


def _metric(
    run: str,
    step: int | None,
    bench: str,
    value: float,
    ci: tuple[float, float] | None,
    settings: dict[str, Any] | None,
    source: str = "reproduced",
    checker: str = "math_verify",
) -> list[Any]:
    low, high = ci or (None, None)
    text, key = (settings_json(settings), settings_key(settings)) if settings else (None, None)
    return [run, step, bench, bench.lower(), checker, "pass@1", value, low, high, 1, source, text, key]  # fmt: skip


def _released(cell: str, method: str) -> list[Any]:
    return [f"released/{cell}", cell, method, "qwen3-4b-base", "math", f"TMLR-Group-HF/{method}", "0a1b2c3", "done"]


def build(db: Path, seeded_neighbour: bool = True) -> Path:
    """Write the store described above at ``db`` (schema migrated to the current version)."""
    con = duckdb.connect(str(db))
    try:
        schema.migrate(con)
        for table in ("Table 1", "Table 5"):  # the ablation table repeats Table 1: shown once
            for bench, value in (("MATH500", 80.0), ("GSM8K", 90.0)):
                con.execute(
                    "INSERT INTO paper_results VALUES (?, 'MATH', 'Qwen3-4B-Base', 'gt_grpo', ?, ?, false, 'pass@1', "
                    "'qwen3-4b-base', 'math', ?)",
                    [table, bench, value, bench.lower()],
                )
        for run, started in ((NEW_RUN, "2026-02-01"), (OLD_RUN, "2026-01-01")):
            con.execute(
                "INSERT INTO runs (run_id, cell_id, method, base_model, dataset, backend, status, started_at, "
                "last_step, total_steps) VALUES (?, ?, 'gt_grpo', 'qwen3-4b-base', 'math', 'local', 'finished', ?, "
                "30, 30)",
                [run, GT, started],
            )
        con.executemany(
            "INSERT INTO released_checkpoints (run_id, cell_id, method, base_model, dataset, hub_repo_id, revision, "
            "status) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [_released(GT, "gt_grpo"), _released(C3, "co_rewarding_3")],
        )
        rows = [
            _metric(f"released/{GT}", None, "MATH500", 0.8123, (0.78, 0.84), SEED0, "released"),
            _metric(f"released/{GT}", None, "MATH500", 0.7650, (0.74, 0.79), SEED1, "released"),
            _metric(f"released/{GT}", None, "GSM8K", 0.91, (0.89, 0.93), SEED0, "released"),
            _metric(f"released/{GT}", None, "MATH500", 0.5, (0.4, 0.6), SEED0, "released", "strict"),
            _metric(f"released/{C3}", None, "MATH500", 0.60, (0.55, 0.65), SEED0, "released"),
            _metric(NEW_RUN, 10, "MATH500", 0.50, (0.45, 0.55), REPRODUCED),
            _metric(NEW_RUN, 20, "MATH500", 0.7123, (0.68, 0.745), REPRODUCED),
            _metric(NEW_RUN, 20, "GSM8K", 0.85, None, None),
            _metric(OLD_RUN, 30, "MATH500", 0.99, (0.98, 1.0), REPRODUCED),
        ]
        if seeded_neighbour:
            for k, value in enumerate((0.700, 0.702, 0.704)):
                run = f"{GT_3B}__seed{k}@2026-01-15" if k else f"{GT_3B}@2026-01-15"
                con.execute(
                    "INSERT INTO runs (run_id, cell_id, method, base_model, dataset, backend, status, started_at, "
                    "last_step, total_steps) VALUES (?, ?, 'gt_grpo', 'qwen3-4b-base', 'dapo14k', 'local', 'finished', "
                    "'2026-01-15', 30, 30)",
                    [run, f"{GT_3B}__seed{k}" if k else GT_3B],
                )
                rows.append(_metric(run, 30, "MATH500", value, (value - 0.003, value + 0.003), REPRODUCED))
        con.executemany(f"INSERT INTO eval_metrics ({COLUMNS}, settings_key) VALUES ({', '.join('?' * 13)})", rows)
    finally:
        con.close()
    return db
