"""corewarding: the Co-rewarding reproduction platform (arXiv 2508.00410): data, GRPO training, evaluation,
results, publishing and the Prefect pipeline over the checkpoint matrix."""

from __future__ import annotations

import argparse
import errno
import faulthandler
import json
import logging
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from hydra.errors import HydraException
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from corewarding import methods
from corewarding.cli import data as data_cli
from corewarding.cli import help as cli_help
from corewarding.cli import verl as verl_cli
from corewarding.cli.audit import add_subcommands as add_audit_subcommands
from corewarding.cli.demo import run_demo
from corewarding.cli.evaluate import add_subcommands as add_evaluation_subcommands
from corewarding.cli.hub import add_subcommands as add_hub_subcommands
from corewarding.cli.pipeline import add_subcommands as add_pipeline_subcommands
from corewarding.cli.results import add_subcommands as add_results_subcommands
from corewarding.cli.verl import dry_run, print_launch
from corewarding.config import ConfigError, compose_config
from corewarding.files import SourceError
from corewarding.log_once import install
from corewarding.matrix import hub_repo_id, load_matrix, run_dir
from corewarding.methods.voting import Voter, voter_from_config
from corewarding.pipeline.dvc import DvcError
from corewarding.pipeline.pool_checks import PoolError
from corewarding.pipeline.prefect_session import Interrupted, interruptible
from corewarding.pipeline.report import format_table
from corewarding.pipeline.store import StoreError
from corewarding.rescore import score_file
from corewarding.training import backend
from corewarding.training.errors import CheckpointError, RunInUseError, RunWriteError, TrainingInterrupted

log = logging.getLogger("corewarding")


def _matrix_list(args: argparse.Namespace) -> int:
    matrix = load_matrix(args.matrix)
    entries = [
        {
            **c.to_dict(),
            "cell_id": c.cell_id,
            "hub_repo_id": hub_repo_id(c, args.org),
            "run_dir": str(run_dir(c)),
        }
        for c in matrix.cells
    ]
    if args.json:
        print(json.dumps(entries, indent=2))
    else:
        for e in entries:
            print(f"{e['cell_id']}\t{e['hub_repo_id']}")
    return 0


def _rewards_score(args: argparse.Namespace) -> int:
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
    from corewarding.training.checkpoint import convert_legacy  # torch: imported when used

    for folder in args.folders:
        convert_legacy(Path(folder))
        print(f"converted {folder}")
    return 0


def _demo(args: argparse.Namespace) -> int:
    rows = run_demo(args.matrix, args.runs_dir, args.overrides)
    print(format_table(rows))
    print(f"\nruns written under {Path(args.runs_dir).resolve()}/<cell_id>/ (metrics.jsonl, config.yaml, checkpoints/)")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="corewarding",
        description=__doc__,
        epilog=cli_help.overview(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    matrix = sub.add_parser("matrix", help="the checkpoint matrix").add_subparsers(dest="action", required=True)
    listing = matrix.add_parser("list", help="print the cells and their Hub repo ids")
    listing.add_argument("--matrix", default="paper", help="configs/matrix/NAME.yaml (default: paper)")
    listing.add_argument("--org", default="TMLR-Group-HF", help="Hub organisation of the repo ids")
    listing.add_argument("--json", action="store_true", help="a JSON list of objects")
    listing.set_defaults(func=_matrix_list)

    rewards = sub.add_parser("rewards", help="reward methods").add_subparsers(dest="action", required=True)
    score = rewards.add_parser("score", help="rescore rollout dumps (JSON lines) with a text-based method")
    score.add_argument(
        "--method",
        required=True,
        help="a method that rewards from text: "
        + ", ".join(n for n in methods.names() if methods.get(n).kind == "text"),
    )
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
    score.set_defaults(func=_rewards_score)

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

    data_cli.add_subcommands(sub)

    demo = sub.add_parser("demo", help="train all seven methods on the tiny model and data on CPU")
    demo.add_argument("overrides", nargs="*", help="extra Hydra overrides, e.g. schedule.total_steps=2")
    demo.add_argument("--matrix", default="demo")
    demo.add_argument("--runs-dir", default="runs/demo", help="apart from runs/ so single-cell runs never collide")
    demo.set_defaults(func=_demo)

    add_results_subcommands(sub)

    add_evaluation_subcommands(sub)
    add_audit_subcommands(sub)

    add_pipeline_subcommands(sub)

    add_hub_subcommands(sub)
    cli_help.attach_examples(sub.choices)
    return parser


PATH_ERRNOS = (errno.ENAMETOOLONG, errno.EACCES, errno.EROFS, errno.ENOTDIR, errno.EISDIR)


def _stacks_on_sigusr1() -> None:
    """``kill -USR1 PID`` prints where every thread is, on stderr, and the command goes on."""
    try:
        faulthandler.register(signal.SIGUSR1, all_threads=True)
    except (AttributeError, ValueError, OSError):  # stderr is not a file (captured, as under pytest): nowhere to print
        log.debug("no stack dump on SIGUSR1: stderr has no file descriptor")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    # Hydra overrides after an option (e.g. `--pairs F key=value`) arrive here; they belong to the overrides.
    if extra and hasattr(args, "overrides") and not any(e.startswith("-") for e in extra):
        args.overrides = [*args.overrides, *extra]
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO, format="%(levelname)s %(name)s: %(message)s"
    )
    for noisy in ("httpx", "torch"):  # Prefect's API calls; torch's exit-time cache statistics
        logging.getLogger(noisy).setLevel(logging.DEBUG if args.verbose else logging.WARNING)

    install()  # each warning (offline Hub, bf16 on CPU, ...) once per process
    _stacks_on_sigusr1()
    try:
        return int(args.func(args))
    except (
        ConfigError,
        SourceError,
        HydraException,
        OmegaConfBaseException,
        FileNotFoundError,
        DvcError,
        CheckpointError,
        RunInUseError,
        RunWriteError,
        PoolError,
        StoreError,
    ) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyError as exc:  # an unknown matrix, cell or config option; the message lists the known ones
        print(f"error: {exc.args[0] if exc.args else exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader went away (`corewarding matrix list | head`): nothing more to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so the exit-time flush cannot fail again
        return 0
    except OSError as exc:  # a path the user gave that cannot be used: too long, read-only, a folder, no permission
        if exc.errno not in PATH_ERRNOS or exc.filename is None:
            raise
        print(f"error: {exc.filename}: {exc.strerror}", file=sys.stderr)
        return 2
