"""Data pipeline timings (issue target: each under 15 s on 2 cores).

1. ``data prepare`` of the 14,116-row DAPO set from its raw Hub layout (prompt, solution), with the prompt-length
   check under a tokenizer (the locally built tiny one; no download) and without it;
2. validating the 7,500 released MATH pairs (``data import-rephrased``: parse checks, number heuristic, aligned writes).

Needs ../shared/data. Usage: .venv/bin/python perf/data_perf.py
"""

from __future__ import annotations

import logging
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from corewarding.config import compose_config
from corewarding.data.prepare import prepare
from corewarding.data.rephrase.importer import import_rephrased

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "upstream"
TARGET_S = 15.0


def timed(label: str, fn) -> float:  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    result = fn()
    seconds = time.perf_counter() - start
    verdict = "ok" if seconds < TARGET_S else "OVER TARGET"
    print(f"{label:<58} {seconds:6.2f} s  ({result.rows_in} rows in, {result.rows_out} out)  {verdict}")
    return seconds


def main() -> int:
    if not SHARED.is_dir():
        print(f"skipped: {SHARED} is absent", file=sys.stderr)
        return 0
    logging.basicConfig(level=logging.WARNING)
    machine = platform.processor() or platform.machine()
    print(f"machine: {machine}, {os.cpu_count()} cores, Python {platform.python_version()}")
    with tempfile.TemporaryDirectory() as tmp:
        shipped = pd.read_parquet(SHARED / "dapo/train.parquet")
        raw = Path(tmp) / "dapo_raw.parquet"
        pd.DataFrame(
            {
                "prompt": [p[1]["content"] for p in shipped.prompt],
                "solution": [r["ground_truth"] for r in shipped.reward_model],
            }
        ).to_parquet(raw)
        base = [f"paths.data_dir={tmp}/data", f"paths.artifacts_dir={tmp}/artifacts", f"datasource.local_file={raw}"]
        compose_config(["datasource=tiny", *base[:2], "datasource.tokenizer=base_model"], "data")  # warm imports
        for tokenizer in ("null", "base_model"):
            cfg = compose_config(["datasource=dapo14k", *base, f"datasource.tokenizer={tokenizer}"], "data")
            if tokenizer == "base_model":  # build the tiny tokenizer outside the timing
                from corewarding.data.models import load_tokenizer

                load_tokenizer("base_model", cfg)
            timed(f"prepare dapo14k (14,116 rows), tokenizer={tokenizer}", lambda cfg=cfg: prepare(cfg))
        cfg = compose_config(["datasource=math", "rephrase=release", f"paths.data_dir={tmp}/data"], "data")
        pairs = str(SHARED / "math/train_pairs.parquet")
        timed("validate + write the 7,500 MATH pairs (import-rephrased)", lambda: import_rephrased(cfg, pairs=pairs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
