"""Collapse flags: each collapse rule that fires on a stored run (``collapse.py``, the store's default thresholds),
recorded in ``collapse_flags`` by the ingest that first sees it, so that a collapse is news once.

An ingest re-reads the flags of the runs it took: a rule that fires now and had no row is new (the pipeline sends an
alert for it); a rule that no longer fires (the run's metrics file was replaced) loses its row, so that it is new
again if it fires again. Rows of other runs are left alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime

import duckdb

from corewarding.results.collapse import CollapseRules, collapse_events
from corewarding.results.read import collapse_inputs


@dataclass(frozen=True)
class CollapseFlag:
    """One collapse rule that fired on one run: at which step, and what it saw."""

    run_id: str
    cell_id: str
    rule: str
    step: int
    detail: str

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


RULES = CollapseRules()  # the store's default thresholds (the dashboard's, the report's and the claims')


def flag_collapses(
    con: duckdb.DuckDBPyConnection, run_ids: Sequence[str], rules: CollapseRules = RULES
) -> list[CollapseFlag]:
    """Bring ``collapse_flags`` of ``run_ids`` up to date with their stored metrics; return the flags that are new
    (a rule that fires now on a run and had no row). Part of the caller's transaction."""
    if not run_ids:
        return []
    ids = list(run_ids)
    events = collapse_events(collapse_inputs(con, ids), rules)
    cells = dict(con.execute("SELECT run_id, cell_id FROM runs WHERE list_contains(?, run_id)", [ids]).fetchall())
    known = {
        (str(run), str(rule))
        for run, rule in con.execute(
            "SELECT run_id, rule FROM collapse_flags WHERE list_contains(?, run_id)", [ids]
        ).fetchall()
    }
    firing = [
        CollapseFlag(str(e.run_id), str(cells.get(e.run_id, "")), str(e.rule), int(e.step), str(e.detail))
        for e in events.itertuples(index=False)
    ]
    gone = known - {(f.run_id, f.rule) for f in firing}
    for run, rule in sorted(gone):
        con.execute("DELETE FROM collapse_flags WHERE run_id = ? AND rule = ?", [run, rule])
    new = [f for f in firing if (f.run_id, f.rule) not in known]
    now = datetime.now(UTC).replace(tzinfo=None)
    for flag in new:
        con.execute(
            "INSERT INTO collapse_flags VALUES (?, ?, ?, ?, ?, ?)",
            [flag.run_id, flag.cell_id, flag.rule, flag.step, flag.detail, now],
        )
    return new
