"""Paper · released · reproduced on a page (the paper page for every audited cell, the run page for its cell): the
table with its ⚠ settings flag, a caption naming the interval and the verdicts, and the settings of each column."""

from __future__ import annotations

from functools import cache

import pandas as pd
import streamlit as st

from corewarding.matrix import DEFAULT_HUB_ORG, load_matrix
from corewarding.results.released_read import INTERVAL, VERDICTS, settings_flag, settings_listing
from dashboard.common import ABSENT, table

PAPER_MATRICES = ("paper_v3", "paper")  # the cells whose checkpoints the paper's org released

SUBHEADER = "Paper · released · reproduced"
SHOWN = [
    "flag", "cell_id", "benchmark", "metric", "paper", "released", "released_ci_low", "released_ci_high",
    "reproduced", "reproduced_ci_low", "reproduced_ci_high", "reproduced_step", "paper_vs_released",
    "released_vs_reproduced", "reproduced_seeds", "released_interval", "released_wide_low", "released_wide_high",
    "reproduced_interval", "released_settings_key",
    "reproduced_settings_key", "released_revision", "run_id",
]  # fmt: skip


def shown(frame: pd.DataFrame) -> pd.DataFrame:
    """The columns a page shows, the flag first (``⚠ settings differ: seed``, '' where the settings agree)."""
    return frame.assign(flag=frame["settings_differ"].map(settings_flag))[SHOWN]


def caption() -> str:
    """What the numbers and the verdicts mean."""
    meanings = "; ".join(f"**{v}**: {m}" for v, m in VERDICTS.items())
    return (
        "Percent. Released: a Hub checkpoint the paper released, audited here (one row per settings it was scored "
        "under, never averaged); reproduced: the mean over the cell's seeds of each seed's newest run at its latest "
        "evaluated step (`reproduced_seeds`). Intervals: "
        f"{INTERVAL}. ⚠ names the settings a comparison crosses. {meanings}."
    )


def released_table(frame: pd.DataFrame, name: str) -> None:
    """Show a ``released_comparison`` frame: caption, table (with a CSV download) and the settings per column."""
    st.caption(caption())
    table(shown(frame), name)
    with st.expander("Settings of each column (by settings key)"):
        listing = settings_listing(frame).map(lambda v: "–" if v is None else str(v))  # one type per column
        st.dataframe(listing, hide_index=True, width="stretch", placeholder=ABSENT)


@cache
def paper_cells() -> frozenset[str]:
    """The cell ids of the paper's matrices."""
    return frozenset(c.cell_id for name in PAPER_MATRICES for c in load_matrix(name).cells)


def hub_note(cell_id: str, hub_repo_id: str | None) -> str:
    """What a run with no recorded push says about the Hub: the repo it would go to for a cell of the paper or a run
    naming its own org; a tiny or demo cell under the paper's default org is not meant for the Hub at all.

    >>> hub_note("gt_grpo__qwen2.5-3b__math", "TMLR-Group-HF/GT-Qwen2.5-3B-MATH")
    'not published (its Hub repo would be TMLR-Group-HF/GT-Qwen2.5-3B-MATH)'
    >>> hub_note("majority_voting__tiny-qwen3__tiny", "TMLR-Group-HF/MV-Tiny-Tiny")
    'not published: a tiny/demo cell, not meant for the Hub'
    >>> hub_note("majority_voting__tiny-qwen3__tiny", None)
    'not published: a tiny/demo cell, not meant for the Hub'
    >>> hub_note("majority_voting__tiny-qwen3__tiny", "me/MV-Tiny-Tiny")
    'not published (its Hub repo would be me/MV-Tiny-Tiny)'
    """
    named = isinstance(hub_repo_id, str) and "/" in hub_repo_id
    own_org = named and str(hub_repo_id).split("/", 1)[0] != DEFAULT_HUB_ORG
    if named and (own_org or cell_id in paper_cells()):
        return f"not published (its Hub repo would be {hub_repo_id})"
    return "not published: a tiny/demo cell, not meant for the Hub"
