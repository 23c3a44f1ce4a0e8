"""Each claim's verdict over time (``claim_verdicts``): the pipeline checks the claims after it ingests, and a verdict
that differs from the one stored before is a change (an alert); one that stays the same adds nothing.

A claim seen for the first time (or for the first time under a checker) has its verdict stored with no change
reported: there is nothing it changed from.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

import duckdb

from corewarding.results.claims import ClaimResult, evaluate_claims, load_claims
from corewarding.results.ingest.sources import transaction
from corewarding.results.store.store import writer


@dataclass(frozen=True)
class VerdictChange:
    """A claim whose verdict is not the one stored before: from what to what, and what it now rests on."""

    claim_id: str
    table: str
    text: str
    checker: str
    before: str
    after: str
    effect: float | None
    low: float | None
    high: float | None
    note: str

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


_NEWEST = """SELECT claim_id, verdict FROM claim_verdicts WHERE checker = ?
    QUALIFY row_number() OVER (PARTITION BY claim_id ORDER BY recorded_at DESC, rowid DESC) = 1"""


def stored_verdicts(con: duckdb.DuckDBPyConnection, checker: str) -> dict[str, str]:
    """Claim id -> its newest stored verdict under ``checker``."""
    return {str(c): str(v) for c, v in con.execute(_NEWEST, [checker]).fetchall()}


def record_verdicts(
    con: duckdb.DuckDBPyConnection, results: Sequence[ClaimResult], checker: str
) -> list[VerdictChange]:
    """Store each result's verdict where it differs from the stored one (or none is stored); return the changes
    (a verdict that replaced another). Part of the caller's transaction."""
    before = stored_verdicts(con, checker)
    now = datetime.now(UTC).replace(tzinfo=None)
    changes = []
    for result in results:
        claim, previous = result.claim, before.get(result.claim.id)
        if previous == result.verdict:
            continue
        con.execute(
            "INSERT INTO claim_verdicts VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [claim.id, checker, result.verdict, result.effect, result.low, result.high, result.note, now],
        )
        if previous is not None:
            changes.append(VerdictChange(claim.id, claim.table, claim.text, checker, previous, result.verdict,
                                         result.effect, result.low, result.high, result.note))  # fmt: skip
    return changes


def check_claims(
    db: Path, claims_file: Path, checker: str = "math_verify", timeout: float = 300.0
) -> list[VerdictChange]:
    """Evaluate the claims of ``claims_file`` on the store and record their verdicts, under the store's write lock
    (no other writer changes the runs in between); return the verdicts that changed."""
    claims = load_claims(claims_file)
    with writer(db, timeout=timeout) as con:
        results = evaluate_claims(con, claims, checker)
        return transaction(con, partial(record_verdicts, con, results, checker))
