"""Paper · released · reproduced on the paper page and the run page, rendered with Streamlit's AppTest over the
hand-written store of tests/support/released_store.py (numbers and verdicts computed by hand there)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from corewarding.results.store.store import writer
from dashboard.common import plain
from dashboard.released_table import SUBHEADER
from tests.support import released_store
from tests.support.apptest import render
from tests.support.released_store import C3, GT, NEW_RUN, OLD_RUN

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")


@pytest.fixture()
def db(tmp_path: Path) -> Path:
    return released_store.build(tmp_path / "results.duckdb")


@pytest.fixture()
def app(db: Path, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    monkeypatch.setenv("COREWARDING_RESULTS_DB", str(db))
    return AppTest.from_file(APP, default_timeout=60)


def released_frame(app: AppTest) -> pd.DataFrame:
    """The page's paper · released · reproduced table (the one with a flag and a released column)."""
    frames = [d.value for d in app.dataframe if {"flag", "released", "reproduced"} <= set(d.value.columns)]
    assert len(frames) == 1
    return frames[0]


def test_the_paper_page_shows_every_audited_cell_with_the_settings_flag(app: AppTest) -> None:
    render(app, "views/paper.py")
    assert SUBHEADER in [s.value for s in app.subheader]
    frame = released_frame(app)
    assert sorted(frame["cell_id"]) == [C3, GT, GT, GT]
    math500 = frame[(frame["cell_id"] == GT) & (frame["benchmark"] == "MATH500")].sort_values("released")
    assert math500[["paper", "released", "reproduced", "reproduced_step"]].values.tolist() == [
        [80.0, 76.5, 71.23, 20], [80.0, 81.23, 71.23, 20],
    ]  # fmt: skip
    assert math500["paper_vs_released"].tolist() == ["outside released CI", "within released CI"]
    assert math500["released_vs_reproduced"].tolist() == ["CIs overlap", "CIs disjoint"]
    assert math500["flag"].tolist() == ["⚠ settings differ: seed (evaluation)"] * 2
    assert frame.loc[frame["cell_id"] == C3, "flag"].tolist() == [""]
    caption = " ".join(c.value for c in app.caption)
    assert "95% percentile bootstrap interval over problems" in caption and "**CIs disjoint**" in caption
    listing = app.dataframe[-1].value  # the expander: the settings of each column
    assert sorted(zip(listing["column"], listing["seed"], strict=True)) == [
        ("released", "0"), ("released", "1"), ("reproduced", "0"), ("reproduced", "–"),
    ]  # fmt: skip


def test_the_paper_page_without_audits_says_how_to_get_them(db: Path, app: AppTest) -> None:
    with writer(db) as con:
        con.execute("DELETE FROM eval_metrics WHERE source = 'released'")
    render(app, "views/paper.py")
    assert not any({"flag", "released"} <= set(d.value.columns) for d in app.dataframe)
    message = app.info[-1].value
    assert "corewarding audit --matrix paper_v3" in message and "corewarding results ingest" in message


def test_the_paper_page_names_a_checkpoint_whose_audit_failed(db: Path, app: AppTest) -> None:
    with writer(db) as con:
        con.execute(
            "INSERT INTO released_checkpoints (run_id, cell_id, method, base_model, dataset, hub_repo_id, status, "
            "error) VALUES ('released/entropy__qwen3-4b-base__math', 'entropy__qwen3-4b-base__math', 'entropy', "
            "'qwen3-4b-base', 'math', 'TMLR-Group-HF/Entropy-Qwen3-4B-Base-MATH', 'failed', "
            "'TMLR-Group-HF/Entropy-Qwen3-4B-Base-MATH@main: a gated repository: accept its terms on the Hub, then "
            "set HF_TOKEN')"
        )
    render(app, "views/paper.py")
    (warning,) = [w.value for w in app.warning]
    assert warning.startswith("1 released checkpoint(s) could not be audited")
    assert "entropy__qwen3-4b-base__math: TMLR-Group-HF/Entropy-Qwen3-4B-Base-MATH@main: a gated repository" in warning


def test_the_run_page_shows_its_cells_released_checkpoint(app: AppTest) -> None:
    render(app, "views/run.py", run=NEW_RUN)
    assert SUBHEADER in [s.value for s in app.subheader]
    frame = released_frame(app)
    assert set(frame["cell_id"]) == {GT} and len(frame) == 3  # only the run's cell
    assert (frame["flag"] != "").all()  # seed on MATH500; GSM8K's reproduction was stored without settings
    assert "settings unknown" in frame.loc[frame["benchmark"] == "GSM8K", "flag"].item()
    assert not any("newest evaluated run, not" in c.value for c in app.caption)
    app.selectbox(key="run").set_value(OLD_RUN).run()  # an older run: the reproduced column says it is not this run
    assert released_frame(app)["run_id"].unique().tolist() == [NEW_RUN]
    assert any(f"newest evaluated run, not {plain(OLD_RUN)}" in c.value for c in app.caption)  # escaped: store text
