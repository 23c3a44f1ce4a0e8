"""``corewarding matrix list``: the cells of a checkpoint matrix and their Hub repo ids."""

from __future__ import annotations

import argparse
from typing import Any

from corewarding.cli.output import print_json, stdout_to_stderr
from corewarding.matrix import check_methods, hub_repo_id, load_matrix, run_dir


def _list(args: argparse.Namespace) -> int:
    cells = load_matrix(args.matrix).cells
    check_methods(cells)  # one incomplete method file: one line naming it and its key, exit 2, nothing listed
    entries = [
        {**c.to_dict(), "cell_id": c.cell_id, "hub_repo_id": hub_repo_id(c, args.org), "run_dir": str(run_dir(c))}
        for c in cells
    ]
    with stdout_to_stderr(args.json):  # --json: the table on stderr, stdout the JSON document alone
        for e in entries:
            print(f"{e['cell_id']}\t{e['hub_repo_id']}")
    if args.json:
        print_json(entries, indent=2)
    return 0


def add_subcommands(sub: Any) -> None:
    """Register ``matrix list`` on the top-level subparsers."""
    matrix = sub.add_parser("matrix", help="the checkpoint matrix").add_subparsers(dest="action", required=True)
    listing = matrix.add_parser("list", help="print the cells and their Hub repo ids")
    listing.add_argument("--matrix", default="paper", help="configs/matrix/NAME.yaml (default: paper)")
    listing.add_argument("--org", default="TMLR-Group-HF", help="Hub organisation of the repo ids")
    listing.add_argument(
        "--json", action="store_true", help="a JSON list of objects on stdout; the table goes to stderr"
    )
    listing.set_defaults(func=_list)
