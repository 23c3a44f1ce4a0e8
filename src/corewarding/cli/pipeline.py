"""``corewarding pipeline run|cells``, ``cell train|evaluate`` (the DVC stages), ``deploy`` and ``worker``; the run's
options come from the fields of ``RunOptions`` (corewarding/pipeline/options.py)."""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from typing import Any

from corewarding import CHECKOUT
from corewarding.cli.lazy import handler
from corewarding.pipeline import options


def _at_least_one(value: str) -> int:
    """An argparse type: a whole number of at least 1 (``--limit``), else a usage error naming the value."""
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"{value!r}: must be a whole number of at least 1")
    return number


def add_options(parser: argparse.ArgumentParser, names: Iterable[str] | None = None) -> None:
    """The pipeline's run options (``RunOptions`` in corewarding/pipeline/options.py) as command-line options, in the
    fields' order (only ``names`` when given): each field's flag, form and help line."""
    for spec in options.specs(names):
        form, text = spec.option.form, spec.option.help
        text = {"list": f"comma-separated {text}", "repeat": f"{text}, repeatable"}.get(form, text)
        if form == "positional":
            parser.add_argument(spec.dest, nargs="*", type=spec.item, help=text)
        elif form == "switch":
            parser.add_argument(spec.flag, dest=spec.dest, action="store_true", help=text)
        elif form == "repeat":
            parser.add_argument(spec.flag, dest=spec.dest, action="append", default=[], type=spec.item, help=text)
        else:  # a value, or a comma-separated list (split by options_from_args)
            parser.add_argument(spec.flag, dest=spec.dest, default=None, type=None if form == "list" else spec.item,
                                help=text)  # fmt: skip


def options_from_args(args: argparse.Namespace, names: Iterable[str] | None = None) -> dict[str, Any]:
    """The run options as ``load_settings``' keywords and the flow's parameters: None where not given (the
    configured value), a list for a comma-separated or repeated option, True for a switch that is on."""
    chosen: dict[str, Any] = {}
    for spec in options.specs(names):
        value, form = getattr(args, spec.dest, None), spec.option.form
        if form == "list":
            value = [spec.item(v) for v in str(value).split(",") if v] if value else None
        if form in ("list", "repeat", "positional"):
            value = list(value) if value else None
        elif form == "switch":
            value = True if value else None
        chosen[spec.name] = value
    return chosen


# ``pipeline cells``: the selection and the training overrides (they change the cells' DVC entries).
CELLS_OPTIONS = (*options.SELECTION, "overrides")


def _add_selection(parser: argparse.ArgumentParser) -> None:
    add_options(parser, options.SELECTION)
    parser.add_argument("--config", action="append", default=[], help="configs/pipeline.yaml override, repeatable")


def _add_run(pipeline: argparse._SubParsersAction) -> None:
    """Register ``pipeline run``."""
    run = pipeline.add_parser("run", help="data, then per cell train, evaluate, ingest, publish (Prefect flow)")
    _add_selection(run)
    add_options(run, [name for name in options.names() if name not in options.SELECTION])  # every other option
    run.add_argument(
        "--json", action="store_true",
        help="print the report (with --dry-run: the plan) as one JSON document on stdout; the table goes to stderr",
    )  # fmt: skip
    run.add_argument(
        "--dry-run", action="store_true",
        help="print what the cells need and cost (GPUs, GPU-hours, memory, disk, missing data, gated models); "
        "starts and writes nothing",
    )  # fmt: skip
    run.add_argument(
        "--gpus", type=_at_least_one, default=None, metavar="N",
        help="with --dry-run: the GPUs to give the wall time for (default: 8); each cell takes its own GPU count",
    )  # fmt: skip
    run.set_defaults(func=handler("corewarding.cli.pipeline_commands:run"))


def add_subcommands(sub: argparse._SubParsersAction) -> None:
    """Register ``pipeline``, ``cell`` and ``deploy``."""
    pipeline = sub.add_parser("pipeline", help="the Prefect pipeline over the matrix").add_subparsers(
        dest="action", required=True
    )
    _add_run(pipeline)
    cells = pipeline.add_parser("cells", help="the selected cells, their data stages and DVC entries")
    _add_selection(cells)
    add_options(cells, [name for name in CELLS_OPTIONS if name not in options.SELECTION])
    cells.add_argument("--write", action="store_true", help="add them and their data stages to params.yaml")
    cells.set_defaults(func=handler("corewarding.cli.pipeline_commands:cells"))

    cell = sub.add_parser("cell", help="one step of one matrix cell (the DVC stages call these)").add_subparsers(
        dest="step", required=True
    )
    for step, text in (("train", "train (or resume) a cell"), ("evaluate", "evaluate every saved step of a cell")):
        parser = cell.add_parser(step, help=text)
        parser.add_argument("cell_id")
        parser.add_argument("--matrix", default="demo", help="the matrix the cell belongs to (default: demo)")
        parser.add_argument("overrides", nargs="*")
        parser.add_argument(
            "--force", action="store_true",
            help="redo it even when done (train: the finished run is moved to runs/.superseded/ and trained again; "
            "evaluate: the harness recomputes the units whose inputs changed); dvc repro calls this",
        )  # fmt: skip
        parser.set_defaults(func=handler("corewarding.cli.pipeline_commands:cell_step"))

    deploy = sub.add_parser("deploy", help="register the scheduled deployments with the Prefect server")
    target = deploy.add_mutually_exclusive_group(required=True)
    target.add_argument("--work-pool", help="a process work pool (created if missing); workers run the flows")
    target.add_argument("--serve", action="store_true", help="serve the deployments from this process instead")
    deploy.add_argument(
        "--cell-pool",
        default=None,
        help="the pool whose workers (one per GPU machine) run the scheduled runs' cells; default: in the run itself",
    )
    deploy.add_argument("--root", default=str(CHECKOUT), help="the checkout the workers run from (default: this one)")
    deploy.add_argument("--config", action="append", default=[], help="configs/pipeline.yaml override, repeatable")
    deploy.set_defaults(func=handler("corewarding.cli.pipeline_commands:deploy"))

    worker = sub.add_parser(
        "worker",
        help="a work pool's worker for this machine: Prefect's process worker that does not poll while it is full",
    )
    worker.add_argument("--pool", required=True, help="the work pool (corewarding deploy --work-pool/--cell-pool)")
    worker.add_argument("--limit", type=_at_least_one, default=None, help="cells run at once (1 per set of GPUs)")
    worker.add_argument("--name", default=None, help="the worker's name in Prefect (default: Prefect's)")
    worker.add_argument(
        "--store", default=None,
        help="this worker's shared store (default: store.url or store.dvc_remote of configs/pipeline.yaml); a cell "
        "job naming another store is refused",
    )  # fmt: skip
    worker.add_argument(
        "--create-pool", action="store_true",
        help="create the pool if it does not exist (default: an unknown pool is an error)",
    )  # fmt: skip
    worker.set_defaults(func=handler("corewarding.cli.pipeline_commands:worker"))

    pool_key = sub.add_parser("pool-key", help="the work pool's signing key")
    pool_key_actions = pool_key.add_subparsers(dest="action", required=True)
    create = pool_key_actions.add_parser("create", help="write a new key (mode 0600, never over a file)")
    create.add_argument("path", help="where to write it, e.g. ~/.config/corewarding/pool.key")
    create.set_defaults(func=handler("corewarding.cli.pipeline_commands:pool_key"))
