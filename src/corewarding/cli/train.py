"""``corewarding train`` (one cell), ``checkpoint merge|convert`` and ``config show|snapshot``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from corewarding.cli import verl as verl_cli
from corewarding.cli.verl import dry_run, print_launch
from corewarding.config import compose_config
from corewarding.interrupts import Interrupted, interruptible
from corewarding.training import backend
from corewarding.training.errors import TrainingInterrupted


def _train(args: argparse.Namespace) -> int:
    """Train one cell; Ctrl-C or SIGTERM ends with one line saying how to resume and the shell's code for the signal
    (130 or 143)."""

    try:
        with interruptible():
            return _train_cell(args)
    except Interrupted as stop:  # TrainingInterrupted names the step; earlier, nothing was trained yet
        where = stop.__cause__
        print(where if isinstance(where, TrainingInterrupted) else "interrupted; run the same command to resume",
              file=sys.stderr)  # fmt: skip
        return stop.exit_code


def _train_cell(args: argparse.Namespace) -> int:
    cfg = compose_config(args.overrides)  # a bad override fails here, in a second, before torch is imported
    if cfg.backend == "verl" and args.dry_run:
        return dry_run(cfg, args.run_dir)
    if args.dry_run:
        print(json.dumps({"backend": "local", "dry_run": True, "config": "valid"}))
        return 0

    result = backend.train(cfg, Path(args.run_dir) if args.run_dir else None, trust_unverified=args.trust_unverified)
    if not isinstance(result, backend.RunResult):
        return print_launch(result, None)
    last = result.metrics[-1] if result.metrics else {}
    print(json.dumps({"run_dir": str(result.run_dir), "steps": result.steps, "last": last}))
    return 0


def _checkpoint_convert(args: argparse.Namespace) -> int:
    from corewarding.training.local.checkpoint import convert_legacy  # torch: imported when used

    for folder in args.folders:
        convert_legacy(Path(folder))
        print(f"converted {folder}")
    return 0


def add_subcommands(sub: Any) -> None:
    """Register ``train``, ``checkpoint merge|convert`` and ``config show|snapshot``."""
    trainer = sub.add_parser(
        "train", help="train one cell: Hydra overrides, e.g. method=co_rewarding_2", description="Train one cell."
    )
    trainer.add_argument("overrides", nargs="*", help="Hydra key=value overrides (see below)")
    trainer.add_argument("--run-dir", default=None, help="default: {paths.runs_dir}/{cell_id}")
    trainer.add_argument("--dry-run", action="store_true", help="compose and validate only (backend=verl: no GPU)")
    trainer.add_argument(
        "--trust-unverified", action="store_true", help="resume from a checkpoint without manifest.json (an old run)"
    )
    trainer.set_defaults(func=_train)

    convert = verl_cli.add_subcommands(sub).add_parser(
        "convert", help="rewrite an old pickle checkpoint (trainer.pt) as safetensors + JSON; only one you trust"
    )
    convert.add_argument("folders", nargs="+", help="global_step_N folders")
    convert.set_defaults(func=_checkpoint_convert)

    config = sub.add_parser("config", help="configuration").add_subparsers(dest="action", required=True)
    verl_cli.add_config_actions(config)
