"""corewarding: the Co-rewarding reproduction platform (arXiv 2508.00410): data, GRPO training, evaluation,
results, publishing and the Prefect pipeline over the checkpoint matrix."""

from __future__ import annotations

import argparse
import faulthandler
import logging
import signal
import sys
from collections.abc import Collection, Sequence
from importlib import import_module

from corewarding.cli import help as cli_help
from corewarding.cli.errors import run_reporting_errors
from corewarding.log_once import install

log = logging.getLogger("corewarding")

# Each group module (corewarding.cli.MODULE) registers its commands with ``add_subcommands(sub)``, in the order
# `--help` lists them. A module is imported only when one of its commands runs (issue 45): `--help`, an argument error
# and a light command never load Hydra, DuckDB or Prefect. So `--help` can list them, each command's help line is
# repeated here; tests/unit/test_cli_light.py checks it against the module's own.
GROUPS: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = (
    ("matrix", (("matrix", "the checkpoint matrix"),)),
    ("rewards", (("rewards", "reward methods"),)),
    ("train", (
        ("train", "train one cell: Hydra overrides, e.g. method=co_rewarding_2"),
        ("checkpoint", "checkpoints"),
        ("config", "configuration"),
    )),
    ("data", (("data", "prepare, validate and rephrase data sets (configs/datasource/NAME.yaml)"),)),
    ("demo", (("demo", "train all seven methods on the tiny model and data on CPU"),)),
    ("results", (
        ("results", "the DuckDB results store"),
        ("report", "write the reproduction report: one self-contained HTML file of paper vs reproduced numbers"),
        ("dashboard", "the Streamlit dashboard over the results store (read-only)"),
    )),
    ("claims", (("claims", "check the paper's claims (configs/claims.yaml) on the stored runs"),)),
    ("evaluate", (("evaluate", "evaluate a model or every checkpoint step of a run on benchmarks"),)),
    ("audit", (
        ("audit", "evaluate the paper's released Hub checkpoints under the paper's protocol (Prefect flow runs)"),
    )),
    ("pipeline", (
        ("pipeline", "the Prefect pipeline over the matrix"),
        ("cell", "one step of one matrix cell (the DVC stages call these)"),
        ("deploy", "register the scheduled deployments with the Prefect server"),
        ("worker", "a work pool's worker for this machine: Prefect's process worker that does not poll while it is "
                   "full"),
        ("pool-key", "the work pool's signing key"),
    )),
    ("hub", (
        ("publish", "build (and --push) the Hub folder of a run's checkpoint step(s): weights, model card, config"),
        ("publish-data", "build (and --push) the Hub dataset folder of a rephrased training set"),
    )),
)  # fmt: skip


def build_parser(commands: Collection[str] | None = None) -> argparse.ArgumentParser:
    """The command line's parser, every group's commands registered (their modules imported). With ``commands``, only
    the groups holding those are; each other command is a stand-in of its name and help line, which takes any
    arguments: enough for `corewarding --help`, and for telling which command an argument list runs."""
    parser = argparse.ArgumentParser(
        prog="corewarding",
        description=__doc__,
        epilog=cli_help.overview(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    registered: list[str] = []
    for module, entries in GROUPS:
        names = [name for name, _ in entries]
        if commands is None or any(name in commands for name in names):
            import_module(f"corewarding.cli.{module}").add_subcommands(sub)
            registered += names
        else:
            for name, text in entries:
                sub.add_parser(name, help=text, add_help=False)
    cli_help.attach_examples({name: sub.choices[name] for name in registered})
    return parser


def _stacks_on_sigusr1() -> None:
    """``kill -USR1 PID`` prints where every thread is, on stderr, and the command goes on."""
    try:
        faulthandler.register(signal.SIGUSR1, all_threads=True)
    except (AttributeError, ValueError, OSError):  # stderr is not a file (captured, as under pytest): nowhere to print
        log.debug("no stack dump on SIGUSR1: stderr has no file descriptor")


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # Which command runs, read by the stand-ins' parser: `--help`, no command or an unknown one ends here.
    command = build_parser(()).parse_known_args(argv)[0].command
    parser = build_parser({command})  # only that command's group is imported
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
