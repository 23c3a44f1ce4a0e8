"""The paper's claims (``configs/claims.yaml``) checked on the store: holds, does not hold or undecided, with the
effect, its interval, what the interval holds and what would decide an open claim (``corewarding claims``)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from corewarding.results.claims import CHECKERS
from dashboard.common import query, require_store, table

COLUMNS = ["verdict", "text", "table", "effect", "low", "high", "df", "variance", "lenders", "seeds", "runs",
           "seeds_needed", "missing", "note"]  # fmt: skip

require_store()
st.title("Paper claims")
checker = st.radio("Checker", list(CHECKERS), horizontal=True, key="checker", bind="query-params")
results: pd.DataFrame = query("paper_claims", checker)
counts = results["verdict"].value_counts()
st.caption(
    f"{counts.get('holds', 0)} hold, {counts.get('does not hold', 0)} do not, {counts.get('undecided', 0)} undecided "
    "(configs/claims.yaml). An interval is a t interval (df: Welch-Satterthwaite) that holds seed and problem "
    "variance; a one-seed cell borrows from the cells of its method, model family and size (lenders, with their df), "
    "and with none to borrow the claim stays undecided. seeds_needed: seeds per cell to find the measured effect with "
    "80% probability. `corewarding claims` prices the cells that would decide an open claim."
)
table(results[COLUMNS].round(3), "paper-claims")
