"""The report's first section: the paper's claims (``configs/claims.yaml``) checked on the store, each with its
verdict, effect and interval, what the interval holds and what would decide it. Every text is escaped."""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

from corewarding.results.claim_rule import FAILS, HOLDS
from corewarding.results.claims import ClaimResult
from corewarding.results.report.markup import num, table

HEADERS = ["claim", "table", "verdict", "effect [95% CI]", "variance", "fewest seeds", "runs", "to decide it"]


def _effect(r: ClaimResult) -> str:
    if r.effect is None:
        return "–"
    df = f" (t, df {r.df:.1f})" if r.df is not None and math.isfinite(r.df) else ""
    return num(r.effect, 3) + (f" [{num(r.low, 3)}, {num(r.high, 3)}]{df}" if r.low is not None else "")


def _decide(r: ClaimResult) -> str:
    parts = [f"cells without runs: {', '.join(r.missing)}"] if r.missing else []
    parts += [f"{r.seeds_needed} seeds per cell for {r.power:.0%} power at this effect"] if r.seeds_needed else []
    lent = ", ".join(f"{d['cell']} (df {d['df']})" for d in r.lenders)
    parts += [f"seed variance lent by {lent}"] if lent else []
    parts += [r.note] if r.note and not r.missing else []
    return escape("; ".join(parts)) or "–"


def claims_section(results: Sequence[ClaimResult]) -> str:
    """The claims as a table; a claim that does not hold is marked like a cell outside its interval."""
    if not results:
        return ""
    rows = [
        ([escape(r.claim.text), escape(r.claim.table), escape(r.verdict), _effect(r), escape(r.variance or "–"),
          num(r.seeds), num(len(r.runs)), _decide(r)], "out" if r.verdict == FAILS else "")
        for r in results
    ]  # fmt: skip
    held = sum(r.verdict == HOLDS for r in results)
    failed = sum(r.verdict == FAILS for r in results)
    return (
        f'<h2 id="claims">The paper\'s claims ({held} hold, {failed} do not, {len(results) - held - failed} '
        "undecided)</h2><p>Each claim of <code>configs/claims.yaml</code> on the stored runs. An interval is a t "
        "interval at the Welch-Satterthwaite degrees of freedom that holds seed and problem variance; a one-seed cell "
        "borrows from the cells of its method, model family and size (named, with their degrees of freedom), and "
        "with none to borrow the claim stays undecided. "
        "<code>corewarding claims</code> also prices the cells that would decide an open claim.</p>"
        + table(HEADERS, rows)
    )
