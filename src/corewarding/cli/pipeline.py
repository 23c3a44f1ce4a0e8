"""``corewarding pipeline run|cells``, ``cell train|evaluate`` (the DVC stages), ``deploy`` and ``worker``."""

from __future__ import annotations

import argparse

from corewarding import CHECKOUT
from corewarding.cli.lazy import handler


def _at_least_one(value: str) -> int:
    """An argparse type: a whole number of at least 1 (``--limit``), else a usage error naming the value."""
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"{value!r}: must be a whole number of at least 1")
    return number


def _add_selection(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--matrix", default=None, help="configs/matrix/NAME.yaml (default: pipeline.yaml's, demo)")
    parser.add_argument("--method", help="comma-separated methods, e.g. co_rewarding_1,co_rewarding_2")
    parser.add_argument("--base-model", help="comma-separated base models")
    parser.add_argument("--dataset", help="comma-separated datasets")
    parser.add_argument("--cell", help="comma-separated cell ids")
    parser.add_argument("--config", action="append", default=[], help="configs/pipeline.yaml override, repeatable")
    parser.add_argument("overrides", nargs="*", help="training overrides of every cell (paths.* apply to all steps)")


def _add_run(pipeline: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register ``pipeline run``."""
    run = pipeline.add_parser("run", help="data, then per cell train, evaluate, ingest, publish (Prefect flow)")
    _add_selection(run)
    run.add_argument("--steps", help="comma-separated subset of data,train,evaluate,ingest,publish")
    run.add_argument("--eval-override", action="append", default=[], help="an evaluation override, repeatable")
    run.add_argument("--push", action="store_true", help="upload to the Hub (token: HF_TOKEN or the HF cache)")
    run.add_argument("--force-evaluate", action="store_true", help="call the evaluation even for evaluated steps")
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
    run.add_argument(
        "--work-pool", default=None,
        help="run each cell as a flow run on this Prefect work pool (corewarding deploy --work-pool registers it; "
        "needs PREFECT_API_URL and a shared store: store.url or store.dvc_remote)",
    )  # fmt: skip
    run.set_defaults(func=handler("corewarding.cli.pipeline_commands:run"))


def add_subcommands(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register ``pipeline``, ``cell`` and ``deploy``."""
    pipeline = sub.add_parser("pipeline", help="the Prefect pipeline over the matrix").add_subparsers(
        dest="action", required=True
    )
    _add_run(pipeline)
    cells = pipeline.add_parser("cells", help="the selected cells, their data stages and DVC entries")
    _add_selection(cells)
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
