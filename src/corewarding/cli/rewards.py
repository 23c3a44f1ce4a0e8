"""``corewarding rewards score``: rescore rollout dumps (JSON lines) with a text-based reward method."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from corewarding import methods
from corewarding.files import SourceError
from corewarding.methods.voting import Voter, voter_from_config
from corewarding.rescore import score_file


def _score(args: argparse.Namespace) -> int:
    vote = OmegaConf.create(
        {
            "canonicalize": args.canonicalize,
            "math_verify_workers": args.math_verify_workers,
            "math_verify_timeout_s": args.math_verify_timeout,
        }
    )
    try:
        voter: Voter = voter_from_config(vote)
    except ValueError as exc:  # --math-verify-workers 0
        print(f"error: --math-verify-workers: {exc}", file=sys.stderr)
        return 2
    if Path(args.output).is_dir():
        print(f"error: --output {args.output} is a folder; name the JSON lines file to write", file=sys.stderr)
        return 2
    try:
        summary = score_file(args.method, Path(args.input), Path(args.output), voter)
    except (SourceError, KeyError) as exc:  # rescore's InputError is a SourceError
        print(f"error: {exc.args[0] if exc.args else exc}", file=sys.stderr)
        return 2
    finally:
        voter.close()
    print(json.dumps(summary, allow_nan=False))
    return 0


def add_subcommands(sub: Any) -> None:
    """Register ``rewards score``; its ``--method`` help lists the text-reward methods of the registry."""
    rewards = sub.add_parser("rewards", help="reward methods").add_subparsers(dest="action", required=True)
    score = rewards.add_parser("score", help="rescore rollout dumps (JSON lines) with a text-based method")
    text_methods = ", ".join(n for n in methods.names() if methods.get(n).kind == "text")
    score.add_argument("--method", required=True, help=f"a method that rewards from text: {text_methods}")
    score.add_argument(
        "--input",
        required=True,
        help="JSON lines: uid, view, response, ground_truth (views: original, rephrased, teacher; for "
        "co_rewarding_3 every uid has original, rephrased, teacher_original and teacher_rephrased)",
    )
    score.add_argument("--output", required=True, help="JSON lines of the rewarded rows, with reward and label")
    score.add_argument("--canonicalize", default="exact", choices=["exact", "normalized", "math_verify"])
    score.add_argument(
        "--math-verify-timeout", type=float, default=5.0, help="seconds per comparison before it counts as unequal"
    )
    score.add_argument(
        "--math-verify-workers", type=int, default=None, help="math-verify processes (default: one per core)"
    )
    score.set_defaults(func=_score)
