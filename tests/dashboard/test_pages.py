"""Every dashboard page rendered with Streamlit's AppTest over a synthetic store, with its content checked."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from streamlit.dataframe_util import convert_arrow_bytes_to_pandas_df
from streamlit.testing.v1 import AppTest

from corewarding.matrix import load_matrix
from corewarding.results import synthetic
from corewarding.results.ingest.ingestion import ingest
from dashboard.common import METHOD_COLOURS

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")


def chart(app: AppTest, index: int = 0) -> tuple[dict[str, Any], pd.DataFrame]:
    """The Vega-Lite spec of a page's chart and its (first) dataset."""
    proto = app.get("vega_lite_chart")[index].proto
    return json.loads(proto.spec), convert_arrow_bytes_to_pandas_df(proto.datasets[0].data.data)


def render(app: AppTest, page: str | None = None) -> AppTest:
    if page:
        app.switch_page(page)
    app.run()
    assert not app.exception, [e.value for e in app.exception]
    return app


def test_matrix_page(app: AppTest) -> None:
    render(app)
    assert app.title[0].value == "Matrix"
    assert "12 run(s) in this store are synthetic" in app.warning[0].value
    grid = app.dataframe[0].value
    assert app.radio[0].value == "paper_v3 matrix"  # the 72 released checkpoints
    assert len(grid) == 72 and grid["status"].value_counts().to_dict() == {
        "not run": 60,
        "finished": 10,
        "running": 1,
        "failed": 1,
    }
    published = grid[grid["hub_url"].notna()]  # links only where the run folder records a push
    assert len(published) == 5 and (published["status"] == "finished").all()
    assert published["hub"].str.match(r"published, step 30 \(001e100\)").all()
    assert grid.loc[grid["cell_id"] == "gt_grpo__qwen2.5-3b__math", "hub_url"].tolist() == [
        "https://huggingface.co/TMLR-Group-HF/GT-Qwen2.5-3B-MATH"
    ]
    unpublished = grid.loc[grid["hub_url"].isna(), "hub"]  # paper cells: the repo their checkpoint would go to
    assert unpublished.str.fullmatch(r"not published \(its Hub repo would be TMLR-Group-HF/[\w.-]+\)").all()
    spec, data = chart(app)
    axis = spec["layer"][0]["encoding"]["x"]["axis"]
    assert (axis["labelOverlap"], axis["labelLimit"]) == (False, 0)  # no header culled or cut
    assert spec["layer"][0]["encoding"]["x"]["sort"] == list(METHOD_COLOURS)[:7]  # Co-rewarding-III last
    colours = data.groupby("status")["text_colour"].unique().map(list).to_dict()
    assert colours == {"finished": ["white"], "running": ["white"], "failed": ["white"], "not run": ["black"]}
    assert spec["layer"][1]["encoding"]["color"] == {
        "field": "text_colour",
        "legend": None,
        "scale": None,
        "type": "nominal",
    }
    app.sidebar.radio[0].set_value("evaluation metric").run()
    grid = app.dataframe[0].value
    assert grid["value"].notna().sum() == 10 and (grid["value"].dropna().between(0, 1)).all()
    _, data = chart(app)  # dark (low) viridis values get white text, light (high) ones black
    low, high = data.loc[data["value"].idxmin()], data.loc[data["value"].idxmax()]
    assert (low["text_colour"], high["text_colour"]) == ("white", "black")
    app.radio[0].set_value("paper matrix").run()
    assert len(app.dataframe[0].value) == 66  # the v2 paper's
    app.radio[0].set_value("runs in the store").run()
    assert len(app.dataframe[0].value) == 12
    assert not app.exception


def test_co_rewarding_3_cells_on_the_matrix_and_paper_pages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A store with two v2 cells and two Co-rewarding-III cells: III sits in the paper_v3 grid with its own
    colour, and the paper page lists it as having no paper value instead of comparing it."""
    cells = load_matrix("paper_v3").cells
    cr3 = [c for c in cells if c.method == "co_rewarding_3"][:2]
    runs, data = synthetic.write_result_set(tmp_path, [*cells[:2], *cr3], synthetic.SyntheticSpec())
    ingest(tmp_path / "results.duckdb", [runs], data_dirs=[data])
    monkeypatch.setenv("COREWARDING_RESULTS_DB", str(tmp_path / "results.duckdb"))
    app = render(AppTest.from_file(APP, default_timeout=60))
    grid = app.dataframe[0].value
    assert len(grid) == 72 and set(grid.loc[grid["cell_id"].str.startswith("co_rewarding_3"), "status"]) == {
        "finished",
        "not run",
    }
    render(app, "views/curves.py")
    render(app, "views/paper.py")
    unpaired = app.dataframe[1].value
    assert app.subheader[0].value == "Runs without a paper value (2)"
    why = [c.value for c in app.caption if "for these cells" in c.value]
    assert len(why) == 1 and why[0].startswith(
        "No paper value is available here for these cells: the v3 paper's Co-rewarding-III values are not available "
        "here (the reference CSV holds the v2 paper's numbers; it gains them when a source is found), and cells added "
        "here have none."
    )
    assert "print no" not in why[0]  # the v3 paper does print them: the CSV lacks them
    assert unpaired["cell_id"].tolist() == sorted(c.cell_id for c in cr3)
    assert set(unpaired["paper"]) == {"no paper value"} and (unpaired["evaluated_steps"] > 0).all()
    assert "co_rewarding_3" not in set(app.dataframe[0].value["method"])  # never compared with a paper number


def test_paper_page(app: AppTest) -> None:
    render(app, "views/paper.py")
    assert app.title[0].value == "Paper vs reproduction"
    assert app.selectbox[0].value == "Table 7"  # the table holding the synthetic cells (Qwen2.5 on MATH)
    frame = app.dataframe[0].value
    measured = frame.dropna(subset=["measured"])
    assert len(frame) == 147 and len(measured) > 0
    assert (measured["difference"] - (measured["measured"] - measured["paper"])).abs().max() < 0.011
    assert set(frame.loc[frame["flag"] != "", "benchmark"]) == {"IFEval"}
    assert app.metric[0].value == f"{len(measured)} / 147"
    colour = chart(app)[0]["layer"][1]["encoding"]["color"]["scale"]
    assert dict(zip(colour["domain"], colour["range"], strict=True)) == {
        m: METHOD_COLOURS[m] for m in measured["method"].unique()
    }
    app.radio[0].set_value("best").run()
    best = app.dataframe[0].value.dropna(subset=["measured"])
    assert len(best) == len(measured) and (best["measured"].values >= measured["measured"].values - 1e-9).all()
    app.selectbox[0].set_value("Table 8").run()
    assert app.dataframe[0].value["train_set"].unique().tolist() == ["OpenRS"]


def test_samples_page_shows_question_and_gold_and_filters_by_checker(app: AppTest) -> None:
    render(app, "views/samples.py")
    assert app.title[0].value == "Samples"
    summary, rows = app.dataframe[0].value, app.dataframe[1].value
    assert summary["samples"].tolist() == [16] * 7 and len(rows) == 50
    assert rows["question"].str.match(r"Problem \d of [A-Za-z0-9-]+: what is x").all() and rows["gold"].notna().all()
    question, gold, response = (c.value for c in app.code)  # no row clicked: the first row, in full
    assert question == "Problem 0 of AMC: what is x? Put it in \\boxed{}." and gold == rows["gold"][0]
    assert response.startswith("Step by step for AMC problem 0")
    app.session_state["sample_table"] = {"selection": {"rows": [3], "columns": []}}  # a click on the 4th row
    app.run()
    assert app.code[1].value == rows["gold"][3] and app.code[2].value.endswith(rows["response"][3][-40:])
    app.selectbox(key="strict").set_value("incorrect").run()
    wrong = app.dataframe[1].value
    assert len(wrong) > 0 and not wrong["correct_strict"].any()
    app.selectbox(key="math_verify").set_value("correct").run()
    rescued = app.dataframe[1].value  # wrong under strict, right under math-verify
    assert len(rescued) > 0 and rescued["correct_math_verify"].all() and not rescued["correct_strict"].any()
    app.selectbox(key="strict").set_value("any")
    app.selectbox(key="math_verify").set_value("any")
    app.selectbox(key="disagree").set_value("disagree").run()
    disagree = app.dataframe[1].value
    assert len(disagree) == len(rescued)  # strict never accepts what math-verify rejects in this store
    assert (disagree["correct_strict"] != disagree["correct_math_verify"]).all()
    app.selectbox(key="disagree").set_value("any")
    app.multiselect(key="benchmarks").set_value(["AMC"])
    app.selectbox(key="truncated").set_value("yes").run()
    cut = app.dataframe[1].value
    assert set(cut["benchmark"]) <= {"AMC"} and cut["truncated"].all()


def test_data_page(app: AppTest) -> None:
    render(app, "views/data.py")
    assert app.title[0].value == "Data quality"
    reports = app.dataframe[0].value
    assert reports["stage"].tolist() == ["prepare", "rephrase"]
    app.selectbox[0].set_value(reports["report_id"][1]).run()
    rejected = app.dataframe[2].value
    assert rejected["action"].tolist() == ["kept_original"] * 3
    flagged = app.dataframe[3].value
    assert flagged["reason"].tolist() == ["prompt_too_long"] * 2 and reports["flagged_total"].tolist() == [2, 2]


def test_a_missing_store_is_explained(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COREWARDING_RESULTS_DB", str(tmp_path / "none.duckdb"))
    app = render(AppTest.from_file(APP, default_timeout=60))
    assert "corewarding results ingest" in app.info[0].value


def test_rendering_every_page_leaves_the_store_unchanged(app: AppTest, synthetic_store: Path) -> None:
    before = hashlib.sha256(synthetic_store.read_bytes()).hexdigest(), synthetic_store.stat().st_mtime_ns
    for page in [None, "views/paper.py", "views/curves.py", "views/samples.py", "views/data.py"]:
        render(app, page)
    assert (hashlib.sha256(synthetic_store.read_bytes()).hexdigest(), synthetic_store.stat().st_mtime_ns) == before
    source = "\n".join(p.read_text() for p in Path(APP).parent.rglob("*.py"))
    assert "writer(" not in source and "duckdb.connect" not in source  # pages reach the store only through reader()


def test_paper_page_after_the_demo_says_no_stored_run_is_a_paper_cell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs, data = synthetic.write_result_set(tmp_path, load_matrix("demo").cells, synthetic.SyntheticSpec(steps=8))
    ingest(tmp_path / "results.duckdb", [runs], data_dirs=[data])
    monkeypatch.setenv("COREWARDING_RESULTS_DB", str(tmp_path / "results.duckdb"))
    app = render(AppTest.from_file(APP, default_timeout=60), "views/paper.py")
    assert app.markdown[0].value.startswith("**0 of ") and "measured**" in app.markdown[0].value
    message = app.info[0].value
    assert "No run in the store is a cell of" in message and "corewarding results synthetic" in message
    assert "ingest runs with eval/metrics.parquet" not in message  # the old advice, wrong after the demo
    assert app.subheader[0].value == "Runs without a paper value (8)"  # seven methods, ground truth with two seeds


def test_a_cells_seeds_share_its_matrix_tile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The demo's seven cells, ground truth with two seeds: the store's grid has seven tiles, not eight, and the
    ground-truth tile counts its two seeds."""
    runs, data = synthetic.write_result_set(tmp_path, load_matrix("demo").cells, synthetic.SyntheticSpec(steps=8))
    ingest(tmp_path / "results.duckdb", [runs], data_dirs=[data])
    monkeypatch.setenv("COREWARDING_RESULTS_DB", str(tmp_path / "results.duckdb"))
    app = render(AppTest.from_file(APP, default_timeout=60), "views/matrix.py")
    assert app.radio[0].value == "runs in the store"  # no paper cell is stored: the store's own cells
    [frame] = [d.value for d in app.dataframe if "seeds" in d.value.columns]
    assert len(frame) == 7 and frame["cell_id"].is_unique
    seeds = dict(zip(frame["cell_id"], frame["seeds"], strict=True))
    assert seeds["gt_grpo__tiny__tiny"] == 2 and seeds["entropy__tiny__tiny"] == 1
