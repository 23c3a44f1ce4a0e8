"""The reproduction report of a store (``corewarding report``): one self-contained HTML file of paper vs reproduced
numbers for a matrix, gathered by ``collect`` from a read-only connection and written by ``render``."""

from __future__ import annotations

from pathlib import Path

from corewarding.matrix import load_matrix
from corewarding.results.report.collect import collect, stored_matrix
from corewarding.results.report.render import render
from corewarding.results.store.store import reader


def build_report(
    db: str | Path, matrix: str | None = None, checker: str = "math_verify", policy: str = "latest"
) -> str:
    """Open the store read-only and return the report of ``matrix`` (None: the matrix the store's runs belong to)
    as an HTML string."""
    with reader(db, check=True) as con:  # every block read once: a damaged store stops here, not half-way
        name = matrix or stored_matrix(con)
        return render(collect(con, name, load_matrix(name).cells, str(db), checker, policy))


def report_matrix(db: str | Path) -> str:
    """The matrix ``build_report`` covers by default for the store ``db``."""
    with reader(db) as con:
        return stored_matrix(con)
