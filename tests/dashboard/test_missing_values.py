"""No table shows a raw ``None``: a missing value is drawn as ``—`` on every page that has tables (issue 45)."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from dashboard.config_diff import ABSENT
from tests.support.apptest import render

PAGES = ["views/matrix.py", "views/paper.py", "views/claims.py", "views/data.py", "views/compare.py", "views/runs.py"]


@pytest.mark.parametrize("page", PAGES)
def test_every_table_draws_a_missing_value_as_a_dash(app: AppTest, page: str) -> None:
    app.run()
    render(app, page)
    frames = list(app.dataframe)
    assert frames, f"{page} drew no table"
    # Streamlit draws a missing cell as the text "None" unless the table says otherwise
    assert [f.proto.placeholder for f in frames] == [ABSENT] * len(frames)


def test_the_claims_table_has_missing_values_for_the_check_to_matter(app: AppTest) -> None:
    app.run()
    render(app, "views/claims.py")
    assert any(frame.value.isna().to_numpy().any() for frame in app.dataframe)
