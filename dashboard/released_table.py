"""Paper · released · reproduced on a page (the paper page for every audited cell, the run page for its cell): the
table with its ⚠ settings flag, a caption naming the interval and the verdicts, and the settings of each column."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from corewarding.results.released_read import INTERVAL, VERDICTS, settings_flag, settings_listing
from dashboard.common import table

SUBHEADER = "Paper · released · reproduced"
SHOWN = [
    "flag", "cell_id", "benchmark", "metric", "paper", "released", "released_ci_low", "released_ci_high",
    "reproduced", "reproduced_ci_low", "reproduced_ci_high", "reproduced_step", "paper_vs_released",
    "released_vs_reproduced", "released_settings_key", "reproduced_settings_key", "released_revision", "run_id",
]  # fmt: skip


def shown(frame: pd.DataFrame) -> pd.DataFrame:
    """The columns a page shows, the flag first (``⚠ settings differ: seed``, '' where the settings agree)."""
    return frame.assign(flag=frame["settings_differ"].map(settings_flag))[SHOWN]


def caption() -> str:
    """What the numbers and the verdicts mean."""
    meanings = "; ".join(f"**{v}**: {m}" for v, m in VERDICTS.items())
    return (
        "Percent. Released: a Hub checkpoint the paper released, audited here (one row per settings it was scored "
        "under, never averaged); reproduced: the newest run of the cell at its latest evaluated step. Intervals: "
        f"{INTERVAL}. ⚠ names the settings a comparison crosses. {meanings}."
    )


def released_table(frame: pd.DataFrame, name: str) -> None:
    """Show a ``released_comparison`` frame: caption, table (with a CSV download) and the settings per column."""
    st.caption(caption())
    table(shown(frame), name)
    with st.expander("Settings of each column (by settings key)"):
        listing = settings_listing(frame).map(lambda v: "–" if v is None else str(v))  # one type per column
        st.dataframe(listing, hide_index=True, width="stretch")
