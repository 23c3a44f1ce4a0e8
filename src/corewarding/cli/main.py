"""corewarding: the Co-rewarding reproduction platform (arXiv 2508.00410): data, GRPO training, evaluation,
results, publishing and the Prefect pipeline over the checkpoint matrix."""

from __future__ import annotations

import argparse
import faulthandler
import logging
import signal
from collections.abc import Sequence

from corewarding.cli import audit, claims, data, demo, evaluate, hub, matrix, pipeline, results, rewards, train
from corewarding.cli import help as cli_help
from corewarding.cli.errors import run_reporting_errors
from corewarding.log_once import install

log = logging.getLogger("corewarding")

# Each group module registers its commands with ``add_subcommands(sub)``, in the order `--help` lists them.
GROUPS = (matrix, rewards, train, data, demo, results, claims, evaluate, audit, pipeline, hub)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="corewarding",
        description=__doc__,
        epilog=cli_help.overview(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in GROUPS:
        group.add_subcommands(sub)
    cli_help.attach_examples(sub.choices)
    return parser


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
    return run_reporting_errors(lambda: args.func(args))
