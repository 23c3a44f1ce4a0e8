"""Ids and text from the store are shown with every bidi control and invisible character as its code point
(``<U+202E>``), on the run, runs and matrix pages: a right-to-left override cannot reorder an id on screen."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pyarrow as pa
import pytest
from streamlit.testing.v1 import AppTest

from dashboard.common import plain, visible, visible_frame, visible_tree
from tests.support.apptest import render

RLO = "\u202e"  # right-to-left override
CELL = f"gt_grpo{RLO}__qwen2.5-3b__math"
RUN = f"{CELL}@0ddba11"


def test_visible_writes_each_unseen_character_as_its_code_point() -> None:
    assert visible(f"ab{RLO}cd") == "ab<U+202E>cd"  # not "dc" after it, nor a hidden character
    assert visible("x\u200by\ufeffz\u2066w\u2069") == "x<U+200B>y<U+FEFF>z<U+2066>w<U+2069>"
    assert visible("a\nb\tc\x00d\x7f") == "a<U+000A>b<U+0009>c<U+0000>d<U+007F>"  # an id: one line
    assert visible("a\nb\tc\x1b[31m", multiline=True) == "a\nb\tc<U+001B>[31m"  # model output keeps its lines
    assert visible("p\ue000q\u2028r\u2029s") == "p<U+E000>q<U+2028>r<U+2029>s"  # private use, line/para separators
    assert visible("gt_grp\u043e café 数学 <b>") == "gt_grp\u043e café 数学 <b>"  # visible letters stay as they are
    assert visible("\ud800") == "<U+D800>"  # a lone surrogate
    assert plain(f"a{RLO}*b*") == "a\\<U\\+202E\\>\\*b\\*"  # markup escaped after: "<U+202E>" shows as typed
    assert visible_tree({f"k{RLO}": [f"v{RLO}", 1, None]}) == {"k<U+202E>": ["v<U+202E>", 1, None]}
    frame = pd.DataFrame({f"c{RLO}": [f"a{RLO}", None], "n": [1, 2]})
    shown = visible_frame(frame)
    assert list(shown.columns) == ["c<U+202E>", "n"] and shown.iloc[0, 0] == "a<U+202E>"
    assert frame.iloc[0, 0] == f"a{RLO}"  # the data itself is left as it is (links, selections, downloads)


@pytest.fixture()
def odd_app(synthetic_store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    """The synthetic store plus one run whose ids hold U+202E (written into the tables directly: ingest refuses it),
    the newest run, with a copy of another run's metrics."""
    db = tmp_path / "results.duckdb"
    shutil.copy(synthetic_store, db)
    with duckdb.connect(str(db)) as con:
        (source,) = con.execute("SELECT run_id FROM runs WHERE method = 'gt_grpo' ORDER BY run_id LIMIT 1").fetchone()
        con.execute(
            f"""INSERT INTO runs SELECT * REPLACE (? AS run_id, ? AS cell_id, 'gt_grpo{RLO}' AS method,
            'fin{RLO}ished' AS status, (SELECT max(started_at) FROM runs) + INTERVAL 1 DAY AS started_at,
            '{{"method": {{"name": "gt_grpo{RLO}"}}}}' AS config) FROM runs WHERE run_id = ?""",
            [RUN, CELL, source],
        )
        for table in ("training_metrics", "eval_metrics"):  # constants
            con.execute(f"INSERT INTO {table} SELECT * REPLACE (? AS run_id) FROM {table} WHERE run_id = ?",
                        [RUN, source])  # fmt: skip
    monkeypatch.setenv("COREWARDING_RESULTS_DB", str(db))
    return AppTest.from_file(str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py"), default_timeout=60)


def _nodes(node: Any) -> Iterator[Any]:
    yield node
    for child in getattr(node, "children", {}).values():
        yield from _nodes(child)


SHOWN_CHANNELS = {"color", "tooltip", "text", "facet", "row", "column", "shape", "strokeDash"}  # not x, y, detail


def _shown_fields(spec: Any, shown: bool = False) -> Iterator[str]:
    """The data fields a Vega-Lite spec puts on screen: legends, tooltips, texts, facet headers."""
    if isinstance(spec, dict):
        if shown and isinstance(spec.get("field"), str):
            yield spec["field"]
        for key, value in spec.items():
            yield from _shown_fields(value, shown or key in SHOWN_CHANNELS)
    elif isinstance(spec, list):
        for value in spec:
            yield from _shown_fields(value, shown)


def holding_the_raw_character(app: AppTest) -> list[str]:
    """The elements of the page that show U+202E itself: any text of an element (a title, a caption, a table's cells
    and columns, a picker's options, a button's label, the JSON viewer's text, escaped there as \\u202e or not), and
    the data a chart shows (its legend, tooltips, texts and facet headers; a field only used to draw is not shown)."""
    found = []
    for node in _nodes(app._tree):
        proto = getattr(node, "proto", None)
        if proto is None:
            continue
        if node.type == "vega_lite_chart":
            fields = set(_shown_fields(json.loads(proto.spec)))
            for dataset in proto.datasets:
                frame = pa.ipc.open_stream(dataset.data.data).read_pandas()
                columns = [c for c in frame.columns if c in fields]
                if frame[columns].astype(str).apply(lambda s: s.str.contains(RLO)).any().any():
                    found.append(f"chart {columns}")
            continue
        shown = type(proto)()
        shown.CopyFrom(proto)
        if "id" in shown.DESCRIPTOR.fields_by_name:
            shown.ClearField("id")  # a widget's key, never shown
        data = shown.SerializeToString()
        if RLO.encode() in data or b"\\u202e" in data.lower():
            found.append(f"{node.type}: {str(proto)[:200]}")
    return found


def test_the_runs_and_run_pages_show_an_id_holding_u202e_as_its_code_point(odd_app: AppTest) -> None:
    runs = render(odd_app, "views/runs.py")
    table = runs.dataframe[-1].value
    assert f"{CELL.replace(RLO, '<U+202E>')}@0ddba11" in set(table["run_id"])
    assert "fin<U+202E>ished" in set(table["status"]) and "gt_grpo<U+202E>" in set(table["method"])
    assert "gt_grpo<U+202E>" in runs.multiselect(key="method").options
    assert not holding_the_raw_character(runs)
    run = render(odd_app, "views/run.py")  # the newest run: the odd one
    assert run.selectbox(key="run").value == RUN  # the pick is the run itself; only its label is escaped
    assert RUN.replace(RLO, "<U+202E>") in run.selectbox(key="run").options
    assert "gt\\_grpo\\<U\\+202E\\>" in run.markdown[0].value and run.metric[0].value == "fin<U+202E>ished"
    assert "gt_grpo<U+202E>" in run.json[0].value
    assert not holding_the_raw_character(run)


def test_the_matrix_page_and_a_samples_response_show_u202e_as_its_code_point(odd_app: AppTest) -> None:
    matrix = render(odd_app, "views/matrix.py", cells="runs in the store")
    assert CELL.replace(RLO, "<U+202E>") in set(matrix.dataframe[-1].value["cell_id"])
    assert not holding_the_raw_character(matrix)
    db = Path(os.environ["COREWARDING_RESULTS_DB"])
    with duckdb.connect(str(db)) as con:
        run_id, problem_id = con.execute(
            "SELECT run_id, problem_id FROM eval_samples ORDER BY run_id, benchmark, problem_id LIMIT 1"
        ).fetchone()
        con.execute("UPDATE eval_samples SET response = ?, extracted_answer = ? WHERE run_id = ? AND problem_id = ?",
                    [f"step 1\n\tthe answer is {RLO}24", f"{RLO}42", run_id, problem_id])  # fmt: skip
    samples = render(odd_app, "views/samples.py")
    assert "step 1\n\tthe answer is <U+202E>24" in [c.value for c in samples.code]  # its lines kept, U+202E shown
    assert not holding_the_raw_character(samples)
