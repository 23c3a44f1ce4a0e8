"""``corewarding claims``: the paper's claims (``configs/claims.yaml``) checked on the stored runs, with what the cells
that would decide an open claim cost (the pipeline's dry run)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from corewarding.cli.output import print_json, stdout_to_stderr
from corewarding.config import config_dir
from corewarding.eval_rows import PREFERRED_CHECKERS
from corewarding.matrix import matrix_of

MATRIX_FOR_COST = "paper_v3"  # the matrix whose configs price a missing cell when no other holds it


def _cost(cell_ids: list[str], db: Path) -> float | None:
    """The dry run's GPU-hours for these cells (seed 0 of each), or None when they cannot be planned."""
    from corewarding.pipeline.cells import Selection, plan_cells  # hydra: imported when used
    from corewarding.pipeline.dry_run import dry_run  # duckdb: imported when used

    matrix = matrix_of(cell_ids) or MATRIX_FOR_COST
    try:
        plans = plan_cells(Selection(matrix=matrix, cells=tuple(cell_ids)))
    except (KeyError, ValueError):  # a cell of no shipped matrix: say so instead of guessing its cost
        return None
    return round(sum(c.gpu_hours for c in dry_run(plans, db, evaluation=False).cells), 1)  # training's


def _interval(row: dict[str, Any]) -> str:
    if row["effect"] is None:
        return "-"
    if row["low"] is None:
        return f"{row['effect']:.3f}"
    df = f" (t, df {row['df']})" if row.get("df") is not None else ""
    return f"{row['effect']:+.3f} [{row['low']:+.3f}, {row['high']:+.3f}]{df}"


def format_claims(rows: list[dict[str, Any]]) -> str:
    """One block per claim: its verdict, effect and interval, the variance it holds, and what would decide it."""
    lines = []
    for row in rows:
        lines.append(f"{row['verdict'].upper():14s} {row['id']} ({row['table']}): {row['text']}")
        lines.append(f"{'':15s}effect {_interval(row)}; {row['variance'] or '-'}; fewest seeds {row['seeds']}; "
                     f"{len(row['runs'])} run(s)")  # fmt: skip
        if row["seeds_needed"]:
            lines.append(f"{'':15s}seeds per cell to find this effect with {row['power']:.0%} power: "
                         f"{row['seeds_needed']}")  # fmt: skip
        if row["lenders"]:
            lent = ", ".join(f"{d['cell']} (df {d['df']})" for d in row["lenders"])
            lines.append(f"{'':15s}one-seed cells borrow the seed variance of {lent}")
        if row["missing"]:
            cost = row.get("missing_gpu_hours")
            priced = f" (about {cost} GPU-hours: corewarding pipeline run --dry-run)" if cost is not None else ""
            lines.append(f"{'':15s}would be decided by {', '.join(row['missing'])}{priced}")
        if row["note"]:
            lines.append(f"{'':15s}{row['note']}")
    return "\n".join(lines)


def _claims(args: argparse.Namespace) -> int:
    from corewarding.results.claims import ClaimsError, evaluate_claims, load_claims  # duckdb: imported when used
    from corewarding.results.store.store import (  # duckdb: when used
        StoreBusyError,
        StoreDamagedError,
        default_db,
        reader,
    )

    db = Path(args.db) if args.db else default_db()
    try:
        claims = load_claims(Path(args.file) if args.file else config_dir() / "claims.yaml")
    except ClaimsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not db.is_file():
        print(f"error: no results store at {db}: run `corewarding results ingest` first", file=sys.stderr)
        return 2
    try:
        with reader(db, check=True) as con:
            rows = [r.to_dict() for r in evaluate_claims(con, claims, args.checker)]
    except (StoreBusyError, StoreDamagedError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    with stdout_to_stderr(args.json):  # --json: the text on stderr, stdout the JSON document alone
        for row in rows:
            if row["missing"]:
                row["missing_gpu_hours"] = _cost(row["missing"], db)
        print(format_claims(rows))
    if args.json:
        print_json(rows)
    return 0


def add_subcommands(sub: Any) -> None:
    """Register ``claims``."""
    claims = sub.add_parser("claims", help="check the paper's claims (configs/claims.yaml) on the stored runs")
    claims.add_argument(
        "--db", default=None, help="the results store (default: $COREWARDING_RESULTS_DB, else results/)"
    )
    claims.add_argument("--file", default=None, help="a claims file (default: configs/claims.yaml)")
    claims.add_argument("--checker", default="math_verify", choices=list(PREFERRED_CHECKERS))
    claims.add_argument(
        "--json", action="store_true", help="one JSON list of the claims' results on stdout; the text goes to stderr"
    )
    claims.set_defaults(func=_claims)
