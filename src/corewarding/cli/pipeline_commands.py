"""What ``corewarding pipeline run|cells``, ``cell train|evaluate``, ``deploy``, ``worker`` and ``pool-key`` run
(their parsers are in cli/pipeline.py, so `pipeline --help` loads none of this: Hydra, DuckDB, Prefect's session)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from corewarding.cli.output import print_json, stdout_to_stderr
from corewarding.cli.pipeline import CELLS_OPTIONS, options_from_args
from corewarding.config import ConfigError, compose_config
from corewarding.interrupts import Interrupted, interruptible, resume_hint
from corewarding.matrix import load_matrix
from corewarding.pipeline import options, steps
from corewarding.pipeline.cells import (
    CellPlan,
    all_data_stages,
    check_selection,
    data_stages,
    dvc_entry,
    path_overrides,
    plan_cell,
    plan_cells,
)
from corewarding.pipeline.dvc import add_cells_to_params, add_data_stages
from corewarding.pipeline.job_checks import STORE_VARIABLE
from corewarding.pipeline.run_summary import PipelineFailed, PipelineReport, format_report
from corewarding.runtime.pool_checks import (
    PoolError,
    check_job_overrides,
    check_pipeline,
    check_pool,
    check_server,
    require_api_url,
    require_pool_key,
    warn_if_open,
)
from corewarding.runtime.prefect_session import prefect_api
from corewarding.runtime.worker import checkout_root


def selection_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The matrix and the cell selection options, as the pipeline flow's parameters."""
    return options_from_args(args, options.SELECTION)


# Each selection option, the argparse attribute it lands in and the Selection facet it fills.
SELECTION_OPTIONS = tuple((s.flag, s.dest, s.name) for s in options.specs(options.SELECTION) if s.name != "matrix")


def selection_labels(args: argparse.Namespace) -> dict[str, str]:
    """What a selection error calls each facet: the option that gave its names, else pipeline.yaml's select.*."""
    return {facet: option if getattr(args, attribute, None) else f"select.{facet}"
            for option, attribute, facet in SELECTION_OPTIONS}  # fmt: skip


def _resume_command(argv: list[str]) -> str:
    return " ".join(["corewarding", *argv]) if argv else "corewarding pipeline run"


def _preflight(args: argparse.Namespace) -> Any:
    """Compose the settings, check the selection's names against the matrix and compose the first selected cell's
    config: a typo fails in a second, as one line, before Prefect starts."""
    from corewarding.pipeline.settings import load_settings  # duckdb: imported when used

    settings = load_settings(args.config, **options_from_args(args))
    if settings.work_pool:  # what crosses to another machine is a value, never a lookup on it
        require_api_url(f"--work-pool {settings.work_pool}")
        require_pool_key(f"--work-pool {settings.work_pool}")  # the cell jobs are signed with it
        check_job_overrides(settings.overrides, settings.eval_overrides)
    matrix = load_matrix(settings.selection.matrix)
    cells = check_selection(matrix, settings.selection, selection_labels(args))  # at least one cell
    compose_config(CellPlan(matrix, cells[0], tuple(settings.overrides)).train_overrides())
    return settings


def _dry_run(args: argparse.Namespace) -> int:
    """``pipeline run --dry-run``: what the selected cells need and cost; nothing is started or written."""
    from corewarding.pipeline.dry_run import DEFAULT_GPUS, as_json, dry_run, format_dry_run  # duckdb: when used
    from corewarding.pipeline.settings import load_settings  # duckdb: imported when used

    with stdout_to_stderr(args.json):  # --json: the table on stderr, stdout the JSON document alone
        settings = load_settings(args.config, **{**options_from_args(args), "work_pool": None})  # plans here
        plans = plan_cells(
            settings.selection, settings.overrides, settings.eval_overrides, labels=selection_labels(args),
            workers=None,  # as many processes as the cells and cores make worth it (compose_pool)
        )  # fmt: skip
        run = dry_run(plans, settings.results_db, args.gpus or DEFAULT_GPUS)
        print(format_dry_run(run, default_gpus=args.gpus is None))
    if args.json:
        print_json(as_json(run))
    return 0


def run(args: argparse.Namespace) -> int:
    if args.dry_run:
        return _dry_run(args)
    if args.gpus is not None:
        raise ConfigError("--gpus goes with --dry-run: the GPUs its wall time is for (a run uses its workers' GPUs)")
    try:
        with interruptible():  # from the start: a signal during the preflight also ends in one line and 130/143
            with stdout_to_stderr(args.json):  # --json: the report's table and the rest on stderr
                settings = _preflight(args)
                with prefect_api(Path.cwd()) as api_url:
                    # a typo'd pool, a server that is down, a missing store: one line, before any work
                    if settings.work_pool:
                        check_pipeline(
                            api_url, settings.work_pool, settings.store_url, settings.store_dvc_remote, Path.cwd()
                        )
                    code, report = _run_flow(args)
            if args.json:  # the report, failed cells and all: stdout's one JSON document
                print_json(report)
            return code
    except Interrupted as stop:  # its cell runs cancelled, the private server stopped
        print(resume_hint(_resume_command(sys.argv[1:])), file=sys.stderr)
        return stop.exit_code


def _run_flow(args: argparse.Namespace) -> tuple[int, dict[str, Any]]:
    """The pipeline flow, its report printed: the exit code and the report."""
    from flows.pipeline import pipeline  # prefect: imported when used

    try:
        result = pipeline(**options_from_args(args), config=args.config)
    except PipelineFailed as failed:
        print(format_report(failed.report))
        print(f"\nerror: {failed}", file=sys.stderr)
        return 1, failed.report.to_dict()
    print(format_report(PipelineReport.from_dict(result)))
    print("\nresults are in the DuckDB store; open the dashboard with:\n  .venv/bin/corewarding dashboard")
    return 0, result


def cells(args: argparse.Namespace) -> int:
    from corewarding.pipeline.settings import load_settings  # duckdb: imported when used

    settings = load_settings(args.config, **options_from_args(args, CELLS_OPTIONS))
    plans = plan_cells(settings.selection, settings.overrides, labels=selection_labels(args))
    for plan in plans:
        print(json.dumps({"cell_id": plan.cell_id, "data_stages": data_stages(plan), **dvc_entry(plan)}))
    if args.write:
        add_cells_to_params(settings.params_file, plans)
        add_data_stages(settings.params_file, all_data_stages(plans))
    return 0


def cell_step(args: argparse.Namespace) -> int:
    if args.step == "train":
        result = steps.train_cell(plan_cell(args.matrix, args.cell_id, args.overrides), force=args.force)
    else:  # evaluation overrides; their paths.* also locate the run
        others = [o for o in args.overrides if o not in path_overrides(args.overrides)]
        plan = plan_cell(args.matrix, args.cell_id, path_overrides(args.overrides), others)
        result = steps.evaluate_cell(plan, force=args.force)
    print(json.dumps(result.to_dict()))
    return 0


def deploy(args: argparse.Namespace) -> int:
    from flows import deploy  # prefect: imported when used

    if args.serve:
        deploy.serve(args.config)
        return 0
    api_url = require_api_url("deploy --work-pool")  # the schedules must live on the server that runs them
    require_pool_key("deploy --work-pool")  # its scheduled runs sign their cells on the worker that runs them
    check_server(api_url)
    ids = deploy.deploy_to_pool(args.work_pool, Path(args.root), args.config, cell_pool=args.cell_pool)
    warn_if_open(api_url)
    print(json.dumps({"work_pool": args.work_pool, "cell_pool": args.cell_pool, "deployments": ids}))
    cells = args.cell_pool or args.work_pool
    if args.cell_pool:
        print(f"start the scheduled runs' worker on one machine:  prefect worker start --pool {args.work_pool}")
    print(f"start one worker per GPU machine, in its checkout with its environment active (source .venv/bin/activate):"
          f"  PREFECT_WORKER_QUERY_SECONDS=1 corewarding worker --pool {cells} --limit 1")  # fmt: skip
    return 0


def _api_url() -> str:
    from prefect.settings import PREFECT_API_URL  # prefect: imported when used

    return str(PREFECT_API_URL.value() or "")


def _own_store(root: Path) -> str | None:
    """The store configured in this checkout (configs/pipeline.yaml: store.url or store.dvc_remote)."""
    from corewarding.pipeline.settings import load_settings  # duckdb: imported when used
    from corewarding.pipeline.store.sharing import store_url  # fsspec: imported when used

    return store_url(load_settings([]), root)


def worker(args: argparse.Namespace) -> int:
    from corewarding.runtime.cell_worker import start  # prefect: imported when used

    api_url = _api_url()
    if not api_url:
        raise PoolError("PREFECT_API_URL is not set: a worker needs the pool's Prefect server")
    require_pool_key(f"worker --pool {args.pool}")  # it runs only cell jobs signed with it
    check_server(api_url)
    warn_if_open(api_url)
    if not args.create_pool:  # Prefect's worker would create a misspelt pool and wait on it forever
        check_pool(args.pool, api_url)
    root = checkout_root()
    store = args.store or _own_store(root)
    if store:  # its cell runs inherit it, resolved once (a link retargeted later moves nothing); a job naming
        # another store is refused (docs/work-pool.md)
        from corewarding.pipeline.store.transport import ArtifactStore  # fsspec: imported when used

        store = ArtifactStore(store).resolved_url
        os.environ[STORE_VARIABLE] = store
    print(f"worker for pool {args.pool} in {root}, store {store or 'none (cells with a store are refused)'}",
          file=sys.stderr)  # fmt: skip
    return start(args.pool, args.limit, args.name, checkout=root)


def pool_key(args: argparse.Namespace) -> int:
    from corewarding.pipeline.pool_key import KEY_FILE_VARIABLE, create_key

    path = Path(args.path).expanduser()
    key_id = create_key(path)
    print(f"pool key {key_id} written to {path} (mode 0600); copy it to every worker and every machine that submits "
          f"cells, then on each: export {KEY_FILE_VARIABLE}={path}")  # fmt: skip
    return 0
