"""Does a printed results table match README.md's? ``make demo`` keeps what the pipeline printed and runs this module
on it (``python -m corewarding.pipeline.readme_table PRINTED README.md``): it says "the table matches README.md", or
warns with each row that differs, column by column, README's value first. It never fails the demo: the figures vary
with the CPU and the library builds, so a warning also names this machine's CPU (``/proc/cpuinfo``'s model name and
vector-instruction flags; no other field is read).

A table is ``plain_table``'s (``run_summary.py``): a header line, a rule of dash runs two spaces apart, then one line
per row, keyed by its first column. Each column starts where its dash run starts, so cells may hold spaces.

>>> table = find_table("cell  value\\n----  -----\\nx     0.5 [0.1, 0.9]\\n\\nA note.")
>>> table.rows["x"]["value"]
'0.5 [0.1, 0.9]'
>>> [d.text() for d in compare(table, find_table("cell  value\\n----  -----\\nx     0.6\\n"))]
['x: value 0.5 [0.1, 0.9] in README.md, 0.6 printed']
"""

from __future__ import annotations

import argparse
import logging
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from corewarding.cpu import cpu_fields, describe_cpu

log = logging.getLogger(__name__)

RULE = re.compile(r"-+")


@dataclass(frozen=True)
class Table:
    """A parsed table: its column names, and each row's cells by column, keyed by the row's first cell."""

    columns: tuple[str, ...]
    rows: dict[str, dict[str, str]]


@dataclass(frozen=True)
class RowDifference:
    """A row that differs: ``(column, README's cell, printed cell)`` for each differing column, or the side that
    lacks the row (``missing``: ``"printed"`` or ``"README.md"``)."""

    row: str
    cells: tuple[tuple[str, str, str], ...] = ()
    missing: str | None = None

    def text(self, readme: str = "README.md") -> str:
        """One line naming the row and what differs."""
        if self.missing == "printed":
            return f"{self.row}: in {readme}, not printed"
        if self.missing is not None:
            return f"{self.row}: printed, not in {readme}"
        return f"{self.row}: " + "; ".join(f"{col} {want} in {readme}, {got} printed" for col, want, got in self.cells)


def _is_rule(line: str) -> bool:
    return bool(line.strip()) and set(line.rstrip()) <= {"-", " "} and line.startswith("-")


def _cells(line: str, starts: Sequence[int]) -> list[str]:
    ends = [*starts[1:], None]
    return [line[start:end].strip() for start, end in zip(starts, ends, strict=True)]


def _is_row(line: str, starts: Sequence[int]) -> bool:
    """A table row: it reaches the last column, with the two spaces plain_table puts before every column but the
    first."""
    return len(line.rstrip()) > starts[-1] and all(line[start - 2 : start] == "  " for start in starts[1:])


def parse_tables(text: str) -> list[Table]:
    """Every plain table in ``text``, in order; rows end at a blank line or a line that is not one of the table's."""
    lines = text.splitlines()
    tables = []
    for i in range(1, len(lines)):
        if not _is_rule(lines[i]) or not lines[i - 1].strip() or _is_rule(lines[i - 1]):
            continue
        starts = [m.start() for m in RULE.finditer(lines[i])]
        columns = tuple(_cells(lines[i - 1], starts))
        rows: dict[str, dict[str, str]] = {}
        for line in lines[i + 1 :]:
            if not _is_row(line, starts):
                break
            cells = _cells(line, starts)
            rows.setdefault(cells[0], dict(zip(columns, cells, strict=True)))
        tables.append(Table(columns, rows))
    return tables


def find_table(text: str, first_column: str = "cell") -> Table | None:
    """The last table in ``text`` whose first column is ``first_column`` (the pipeline's final table), or None."""
    found = [t for t in parse_tables(text) if t.columns and t.columns[0] == first_column]
    return found[-1] if found else None


def compare(readme: Table, printed: Table) -> list[RowDifference]:
    """The rows that differ, in README's order, then the printed rows README lacks; cells are compared as text
    (digit for digit) over the columns both tables have."""
    shared = [c for c in readme.columns if c in printed.columns]
    differences = []
    for key, want in readme.rows.items():
        got = printed.rows.get(key)
        if got is None:
            differences.append(RowDifference(key, missing="printed"))
            continue
        cells = tuple((c, want[c], got[c]) for c in shared if want[c] != got[c])
        if cells:
            differences.append(RowDifference(key, cells))
    differences += [RowDifference(key, missing="README.md") for key in printed.rows if key not in readme.rows]
    return differences


def check(printed_text: str, readme_text: str, readme: str = "README.md") -> list[str]:
    """What differs between the printed table and README's, one line each; empty when they match."""
    want, got = find_table(readme_text), find_table(printed_text)
    if want is None:
        return [f"no results table in {readme}: nothing compared"]
    if got is None:
        return ["no results table printed: nothing compared"]
    lines = []
    if want.columns != got.columns:
        lines.append(f"columns: {', '.join(want.columns)} in {readme}; {', '.join(got.columns)} printed")
    return lines + [d.text(readme) for d in compare(want, got)]


def main(argv: Sequence[str] | None = None) -> int:
    """Compare a file of printed output with README.md's table and log the verdict; 0 whatever it says."""
    parser = argparse.ArgumentParser(description="compare a printed results table with README.md's")
    parser.add_argument("printed", type=Path, help="what the pipeline printed (make demo keeps it in runs/)")
    parser.add_argument("readme", type=Path, nargs="?", default=Path("README.md"))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    differences = check(args.printed.read_text(), args.readme.read_text(), args.readme.name)
    if not differences:
        log.info("the table matches %s", args.readme.name)
        return 0
    log.warning(
        "warning: the table differs from %s's in %d line(s); its figures vary with the CPU's vector instructions "
        "and the library builds (this CPU: %s):",
        args.readme.name,
        len(differences),
        describe_cpu(cpu_fields(), os.environ.get("ATEN_CPU_CAPABILITY")),
    )
    for line in differences:
        log.warning("  %s", line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
