"""The embedded default: every method of a matrix (``demo``: tiny model, tiny data, CPU) trained for a few steps."""

from __future__ import annotations

import argparse
import logging
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from corewarding.config import compose_config
from corewarding.matrix import load_matrix
from corewarding.pipeline.run_summary import DemoRow, format_table, summarize_run
from corewarding.run_folder import checkpoints_dir
from corewarding.training.backend import train_local

log = logging.getLogger(__name__)


def run_demo(
    matrix: str = "demo", runs_dir: str | Path = "runs/demo", overrides: Sequence[str] = (), progress: bool = True
) -> list[DemoRow]:
    """Train every cell of ``matrix`` with the local backend; fresh runs (earlier demo runs are replaced).

    Every cell's config is composed first, so a bad override fails in a second, before torch is imported.
    """
    spec = load_matrix(matrix)
    configs = [
        compose_config([*spec.overrides, *cell.overrides(), f"paths.runs_dir={runs_dir}", *overrides])
        for cell in spec.cells
    ]
    rows = []
    for i, (cell, cfg) in enumerate(zip(spec.cells, configs, strict=True), start=1):
        run_dir = Path(runs_dir) / cell.cell_id
        _clear_checkpoints(run_dir)
        log.info("[%d/%d] %s", i, len(spec.cells), cell.cell_id)
        started = time.perf_counter()
        result = train_local(cfg, run_dir, progress=progress)
        label = f"{cell.method}/seed{cell.seed}" if cell.seed else cell.method  # a second seed of a method
        rows.append(summarize_run(label, result.metrics, time.perf_counter() - started))
    return rows


def _clear_checkpoints(run_dir: Path) -> None:
    """The demo always trains from scratch, so a rerun shows the same figures."""
    shutil.rmtree(checkpoints_dir(run_dir), ignore_errors=True)


def _demo(args: argparse.Namespace) -> int:
    rows = run_demo(args.matrix, args.runs_dir, args.overrides)
    print(format_table(rows))
    print(f"\nruns written under {Path(args.runs_dir).resolve()}/<cell_id>/ (metrics.jsonl, config.yaml, checkpoints/)")
    return 0


def add_subcommands(sub: Any) -> None:
    """Register ``demo``."""
    demo = sub.add_parser("demo", help="train all seven methods on the tiny model and data on CPU")
    demo.add_argument("overrides", nargs="*", help="extra Hydra overrides, e.g. schedule.total_steps=2")
    demo.add_argument("--matrix", default="demo")
    demo.add_argument("--runs-dir", default="runs/demo", help="apart from runs/ so single-cell runs never collide")
    demo.set_defaults(func=_demo)
