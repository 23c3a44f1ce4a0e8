"""The Paper claims page (AppTest over the synthetic store, whose 12 cells are Qwen2.5 on MATH): every claim of
configs/claims.yaml is listed with its verdict, and the claims on cells the store lacks are undecided and name them."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from corewarding.config import config_dir
from corewarding.results.claims import load_claims
from tests.support.apptest import render


def test_the_claims_page_lists_every_claim_with_what_would_decide_it(app: AppTest) -> None:
    render(app, "views/claims.py")
    assert app.title[0].value == "Paper claims"
    rows = app.dataframe[0].value
    claims = load_claims(config_dir() / "claims.yaml")
    assert list(rows["text"]) == [c.text for c in claims]
    assert set(rows["verdict"]) == {"undecided"}  # the synthetic store has none of the Qwen3/Llama MATH cells
    assert "co_rewarding_1__qwen3-8b-base__math" in rows["missing"].iloc[0]
    assert app.caption[0].value.startswith("0 hold, 0 do not, 4 undecided")


def test_the_checker_comes_from_the_url(app: AppTest) -> None:
    render(app, "views/claims.py", checker="strict")
    assert app.radio(key="checker").value == "strict" and len(app.dataframe[0].value) == 4
