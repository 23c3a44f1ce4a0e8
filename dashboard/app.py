"""The corewarding results dashboard (``corewarding dashboard``): read-only pages over the DuckDB results store."""

from __future__ import annotations

import streamlit as st

from dashboard.common import connection_per_run

PAGES = [
    st.Page("views/matrix.py", title="Matrix", icon=":material/grid_on:", default=True),
    st.Page("views/paper.py", title="Paper vs reproduction", icon=":material/compare:", url_path="paper"),
    st.Page("views/claims.py", title="Paper claims", icon=":material/rule:", url_path="claims"),
    st.Page("views/curves.py", title="Training curves", icon=":material/show_chart:", url_path="curves"),
    st.Page("views/runs.py", title="Runs", icon=":material/table_rows:", url_path="runs"),
    st.Page("views/run.py", title="Run", icon=":material/insights:", url_path="run"),
    st.Page("views/compare.py", title="Compare runs", icon=":material/difference:", url_path="compare"),
    st.Page("views/samples.py", title="Samples", icon=":material/article:", url_path="samples"),
    st.Page("views/data.py", title="Data quality", icon=":material/fact_check:", url_path="data"),
]

st.set_page_config(page_title="corewarding results", layout="wide")
with connection_per_run():  # one read-only connection per page render, opened on the first uncached query
    st.navigation(PAGES).run()
