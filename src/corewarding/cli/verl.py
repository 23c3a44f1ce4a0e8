"""The verl backend's command-line pieces: ``train ... backend=verl [--dry-run]``, ``config show <cell_id>``,
``config snapshot``, ``checkpoint merge``. ``corewarding.cli`` wires them in.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from corewarding.config import compose_config
from corewarding.matrix import parse_cell_id, run_dir
from corewarding.schemas import PathsConfig, section_of
from corewarding.training.common import cell_of
from corewarding.training.errors import CheckpointError
from corewarding.training.verl.launch import VerlLaunch, train_verl
from corewarding.training.verl.merge import merge_checkpoint
from corewarding.training.verl.plan import ResourcePlan, VerlFacts, plan_cell, table, this_machine
from corewarding.training.verl.snapshot import default_dir, stale_snapshots, write_snapshots
from corewarding.training.verl.verl_config import to_verl_config, verl_yaml


def dry_run(cfg: DictConfig, run_dir: str | None) -> int:
    """Validate ``cfg``'s verl cell without training: one JSON line, after the cell's memory and disk estimate as a
    table row; a cell that does not fit ``verl.gpu_memory_gb`` / ``host_memory_gb`` / ``disk_gb`` is refused (exit
    2, one line). Where ``host_memory_gb`` / ``disk_gb`` are null, this machine's memory and the free disk under the
    run folder are checked instead."""

    run = train_verl(cfg, Path(run_dir) if run_dir else None, dry_run=True)
    plan = plan_cell(cfg, VerlFacts.of(run.verl_config), this_machine(run.run_dir))
    print(table([plan]))
    if not plan.fits:
        print(f"error: {plan.cell_id} does not fit: {'; '.join(plan.problems)}", file=sys.stderr)
        return 2
    return print_launch(run, plan)


def print_launch(run: VerlLaunch, plan: ResourcePlan | None) -> int:
    """One JSON line: the verl cell launched (or, with a plan, only validated)."""
    summary = {
        "backend": "verl",
        "dry_run": plan is not None,
        "cell_id": run.verl_config.corewarding.cell_id,
        "run_dir": str(run.run_dir),
        "gpus": int(run.verl_config.trainer.n_gpus_per_node) * int(run.verl_config.trainer.nnodes),
        "nnodes": int(run.verl_config.trainer.nnodes),
        "ray_address": run.verl_config.ray_kwargs.ray_init.get("address"),  # None: Ray's defaults
        "prompts_per_step": int(run.verl_config.data.train_batch_size),
        "attention": {"kernel": run.attention.kernel, "packed": run.attention.packed, "why": run.attention.why},
        "checks": run.checks,
        **({"plan": plan.as_dict()} if plan is not None else {}),
    }
    print(json.dumps(summary))
    return 0


def split_cell(args: list[str]) -> tuple[str | None, list[str]]:
    """``[cell_id, overrides...]`` or ``[overrides...]``: a first argument without ``=`` is a cell id."""
    if args and "=" not in args[0]:
        parse_cell_id(args[0])  # raises ValueError naming the bad id
        return args[0], args[1:]
    return None, args


def show(args: argparse.Namespace) -> int:
    """Print a composed config: a cell's resolved verl config, or ours for overrides (``--verl``: verl's)."""

    try:
        cell_id, overrides = split_cell(list(args.overrides))
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if cell_id is not None:
        overrides = [*parse_cell_id(cell_id).overrides(), *overrides]
    cfg = compose_config(overrides)
    if cell_id is None and not args.verl:
        print(OmegaConf.to_yaml(cfg), end="")
        return 0

    print(
        verl_yaml(to_verl_config(cfg, run_dir(cell_of(cfg), section_of(cfg, PathsConfig).runs_dir).as_posix())), end=""
    )
    return 0


def snapshot(args: argparse.Namespace) -> int:
    """Regenerate (or with ``--check`` compare) the per-cell verl config snapshots."""

    out = Path(args.out) if args.out else default_dir()
    if args.check:
        problems = stale_snapshots(out, args.matrix)
        for problem in problems:
            print(problem)
        if problems:
            print(f"error: {len(problems)} snapshot(s) out of date; run `corewarding config snapshot`", file=sys.stderr)
        return 1 if problems else 0
    names = write_snapshots(out, args.matrix)
    print(json.dumps({"dir": str(out), "files": len(names)}))
    return 0


def merge(args: argparse.Namespace) -> int:
    """Merge a run's verl checkpoint into a Hugging Face folder."""

    run = Path(args.run)
    if not run.is_dir() and "/" not in args.run:
        run = Path(args.runs_dir) / args.run  # a cell id
    try:
        with contextlib.redirect_stdout(sys.stderr):  # verl's merger prints progress; stdout keeps our JSON line
            out = merge_checkpoint(run, args.step, Path(args.target) if args.target else None)
    except (FileNotFoundError, FileExistsError, CheckpointError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps({"run_dir": str(run), "hf_dir": str(out)}))
    return 0


def add_config_actions(config: argparse._SubParsersAction) -> None:
    """``config show`` (cell id or overrides) and ``config snapshot``."""
    show_p = config.add_parser(
        "show", help="print a cell's resolved verl config (config show CELL_ID) or ours (config show OVERRIDES)"
    )
    show_p.add_argument("overrides", nargs="*", help="a cell id (method__base_model__dataset) and/or Hydra overrides")
    show_p.add_argument("--verl", action="store_true", help="print verl's config for the overrides")
    show_p.set_defaults(func=show)
    snap = config.add_parser("snapshot", help="write every cell's resolved verl config to configs/snapshots/verl/")
    snap.add_argument("--matrix", default="paper_v3", help="default: paper_v3 (the 72 released checkpoints)")
    snap.add_argument("--out", default=None, help="default: configs/snapshots/verl")
    snap.add_argument("--check", action="store_true", help="compare instead of writing; exit 1 when out of date")
    snap.set_defaults(func=snapshot)


def add_subcommands(sub: argparse._SubParsersAction) -> argparse._SubParsersAction:
    """``checkpoint merge``; returns the ``checkpoint`` group, for the local backend's ``checkpoint convert``."""
    ckpt = sub.add_parser("checkpoint", help="checkpoints").add_subparsers(dest="action", required=True)
    merge_p = ckpt.add_parser("merge", help="merge a run's verl FSDP checkpoint into a Hugging Face folder")
    merge_p.add_argument("run", help="a run folder, or a cell id under --runs-dir")
    merge_p.add_argument("--runs-dir", default="runs")
    merge_p.add_argument("--step", type=int, default=None, help="default: the newest saved step")
    merge_p.add_argument("--target", default=None, help="default: {run}/hf/global_step_N")
    merge_p.set_defaults(func=merge)
    return ckpt
