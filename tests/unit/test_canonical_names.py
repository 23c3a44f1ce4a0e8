"""One canonical benchmark name (results/names.py): every row is stored under the paper's spelling, and every reader
matches a benchmark in any spelling, so a claim written ``math500`` finds cells stored as ``MATH500``, ``math500`` or
``Math-500`` (issue 43: both compare claims found no cells on the documented preview)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from corewarding.cli.main import main
from corewarding.config import config_dir
from corewarding.evaluation.eval_config import expand_benchmarks
from corewarding.matrix import Cell, parse_cell_id
from corewarding.results import claim_scores, read, released_read
from corewarding.results.claim_rule import HOLDS
from corewarding.results.claims import Claim, evaluate_claims, load_claims
from corewarding.results.ingest import evaluation
from corewarding.results.ingest.evaluation import EvalFileError
from corewarding.results.ingest.ingestion import ensure_reference
from corewarding.results.names import (
    CANONICAL,
    PAPER_BENCHMARKS,
    benchmark_key,
    benchmark_name,
    key_sql,
    name_key,
    name_sql,
)
from corewarding.results.reference import REFERENCE_CSV, load_reference
from corewarding.results.store.store import reader, writer
from dashboard import queries

ROOT = Path(__file__).resolve().parents[2]


# ---- the table and its SQL twins -------------------------------------------------------------------------------
def test_the_paper_columns_are_the_canonical_names_and_every_shipped_benchmark_has_one() -> None:
    paper = pd.read_csv(REFERENCE_CSV)["benchmark"].unique().tolist()
    assert sorted(paper) == sorted(PAPER_BENCHMARKS)
    assert [benchmark_name(b) for b in paper] == paper  # the paper's spelling is kept as it is
    # the evaluator writes config names: the paper suite (its Table 5) lands on the paper's columns, in order
    assert [benchmark_name(b) for b in expand_benchmarks("paper")] == list(PAPER_BENCHMARKS)
    shipped = sorted(p.stem for p in (config_dir() / "benchmark").glob("*.yaml"))
    assert [s for s in shipped if name_key(s) not in CANONICAL] == []  # a new benchmark config needs a spelling


SPELLINGS = ["MATH500", "math500", "Math-500", " math_500", "livecodebench_v6", "LiveCodeBench-V6", "lcb",
             "mmlu_pro", "MMLU Pro", "minerva_math", "My_Bench", "my-bench", ""]  # fmt: skip


def test_the_sql_twins_agree_with_python_on_every_spelling() -> None:
    sql = f"SELECT {key_sql('b')}, {name_sql('b')} FROM unnest(?::VARCHAR[]) WITH ORDINALITY t(b, i) ORDER BY i"
    rows = duckdb.connect().execute(sql, [SPELLINGS]).fetchall()
    assert rows == [(benchmark_key(b), benchmark_name(b)) for b in SPELLINGS]
    assert [benchmark_name(b) for b in SPELLINGS[:7]] == ["MATH500"] * 4 + ["LCB"] * 3
    assert (benchmark_name("My_Bench"), benchmark_key("my-bench")) == ("My_Bench", "mybench")  # unknown: as given


# ---- on the way in ---------------------------------------------------------------------------------------------
def _parquet(path: Path, rows: list[dict[str, object]]) -> Path:
    pd.DataFrame(rows).to_parquet(path, index=False)
    return path


def test_ingest_stores_every_spelling_under_the_canonical_name(tmp_path: Path) -> None:
    metrics = _parquet(tmp_path / "metrics.parquet", [
        {"step": s, "benchmark": b, "checker": "math_verify", "metric": "pass@1", "value": v, "n": 1}
        for s, b, v in [(10, "math500", 0.61), (20, "Math-500", 0.67), (20, "livecodebench_v6", 0.23),
                        (20, "My_Bench", 0.5)]
    ])  # fmt: skip
    samples = _parquet(tmp_path / "samples.parquet", [
        {"step": 20, "benchmark": b, "problem_id": p, "sample_index": 0, "response": "r"}
        for b, p in [("mmlu_pro", "q1"), ("MMLU-Pro", "q2"), ("math500", "q3")]
    ])  # fmt: skip
    with writer(tmp_path / "s.duckdb") as con:
        assert evaluation.insert_eval_metrics(con, "r1", metrics) == 4
        assert evaluation.insert_eval_samples(con, "r1", samples) == 3
        stored = con.execute("SELECT step, benchmark, benchmark_key FROM eval_metrics ORDER BY step, value").fetchall()
        spelled = con.execute("SELECT benchmark, problem_id FROM eval_samples ORDER BY problem_id").fetchall()
    assert stored == [(10, "MATH500", "math500"), (20, "LCB", "lcb"), (20, "My_Bench", "mybench"),
                      (20, "MATH500", "math500")]  # fmt: skip
    assert spelled == [("MMLU-Pro", "q1"), ("MMLU-Pro", "q2"), ("MATH500", "q3")]


def test_two_spellings_of_one_score_are_one_duplicate(tmp_path: Path) -> None:
    metrics = _parquet(tmp_path / "metrics.parquet", [
        {"step": 20, "benchmark": b, "checker": "strict", "metric": "pass@1", "value": v, "n": 1}
        for b, v in [("math500", 0.4), ("MATH-500", 0.6)]
    ])  # fmt: skip
    with writer(tmp_path / "s.duckdb") as con, pytest.raises(EvalFileError, match=r"\(20, 'MATH500', 'strict'"):
        evaluation.insert_eval_metrics(con, "r1", metrics)


# ---- every reader, on a store written before names were canonical ------------------------------------------------
ROWS = (("qwen3-8b-base", "math"),)
PROBLEMS, SAMPLES = 200, 4
# (method, seed) -> the spelling its rows were stored under and its accuracy; every method has each spelling once
SPELLED = {
    ("co_rewarding_2", 0): ("MATH500", 0.74), ("co_rewarding_2", 1): ("math500", 0.70),
    ("co_rewarding_2", 2): ("Math-500", 0.775),
    ("majority_voting", 0): ("Math-500", 0.41), ("majority_voting", 1): ("MATH500", 0.47),
    ("majority_voting", 2): ("math500", 0.36),
}  # fmt: skip


def _run_id(method: str, seed: int) -> str:
    return f"{Cell(method, *ROWS[0], seed).cell_id}@0000000{seed}"


def _old_store(tmp_path: Path) -> Path:
    """Runs whose samples and scores were inserted as they were spelled (no ingest, as an older store holds them):
    per seed, the first ``rate`` of its 800 samples are right, so every seed mean is exactly its rate."""
    db = tmp_path / "old.duckdb"
    with writer(db) as con:
        ensure_reference(con)
        for (method, seed), (spelling, rate) in SPELLED.items():
            cell, run_id = Cell(method, *ROWS[0], seed), _run_id(method, seed)
            con.execute(
                "INSERT INTO runs (run_id, cell_id, method, base_model, dataset, status, started_at, last_step) "
                "VALUES (?, ?, ?, ?, ?, 'finished', now(), 100)",
                [run_id, cell.cell_id, method, cell.base_model, cell.dataset],
            )
            right = round(rate * PROBLEMS * SAMPLES)
            con.register("spelled_rows", pd.DataFrame(
                [(run_id, 100, spelling, f"p{p:03d}", k, False, p * SAMPLES + k < right)
                 for p in range(PROBLEMS) for k in range(SAMPLES)],
            ))  # fmt: skip
            con.execute(
                "INSERT INTO eval_samples (run_id, step, benchmark, problem_id, sample_index, correct_strict, "
                "correct_math_verify) SELECT * FROM spelled_rows"
            )
            con.unregister("spelled_rows")
            con.execute(
                "INSERT INTO eval_metrics (run_id, step, benchmark, benchmark_key, checker, metric, value, ci_low, "
                "ci_high, n, num_problems) VALUES (?, 100, ?, ?, 'math_verify', 'pass@1', ?, ?, ?, 4, 200)",
                [run_id, spelling, name_key(spelling), rate, rate - 0.03, rate + 0.03],
            )
        released = "released/" + Cell("co_rewarding_2", *ROWS[0]).cell_id
        con.execute(
            "INSERT INTO released_checkpoints (run_id, cell_id, method, base_model, dataset, hub_repo_id, status) "
            "VALUES (?, ?, 'co_rewarding_2', ?, ?, 'TMLR-Group-HF/x', 'done')",
            [released, released.split("/", 1)[1], *ROWS[0]],
        )
        con.execute(
            "INSERT INTO eval_metrics (run_id, step, benchmark, benchmark_key, checker, metric, value, ci_low, "
            "ci_high, n, source) VALUES (?, NULL, 'math-500', 'math500', 'math_verify', 'pass@1', 0.755, 0.72, "
            "0.79, 4, 'released')",
            [released],
        )
    return db


@pytest.mark.parametrize("spelling", ["math500", "MATH500", "Math-500"])
def test_one_claim_finds_its_cells_under_every_stored_spelling(tmp_path: Path, spelling: str) -> None:
    claim = Claim("c", "II beats MV", "Table 1", "compare", ROWS, spelling, ("co_rewarding_2",), ("majority_voting",))
    with reader(_old_store(tmp_path)) as con:
        [result] = evaluate_claims(con, [claim])
    assert result.runs == sorted(_run_id(m, s) for m, s in SPELLED)  # all six, whatever their spelling
    assert (result.missing, result.note) == ([], "")
    assert result.seeds == 3 and result.verdict == HOLDS
    # the mean over seeds of each side: (0.74 + 0.70 + 0.775) / 3 - (0.41 + 0.47 + 0.36) / 3
    assert result.effect == pytest.approx(2.215 / 3 - 1.24 / 3, abs=1e-12)


def test_every_reader_matches_the_stored_spellings(tmp_path: Path) -> None:
    db = _old_store(tmp_path)
    c2_old = _run_id("co_rewarding_2", 2)  # stored as Math-500
    with reader(db) as con:
        claimed = claim_scores.problem_scores(con, [Cell("co_rewarding_2", *ROWS[0])], "MATH500", "math_verify")
        scores = claimed.loc[claimed["run_id"] == c2_old, "score"].to_numpy()
        table = read.paper_comparison(con, "Table 1", "math_verify")
        released = released_read.released_comparison(con, None, "math_verify")
        by_run = queries.eval_metric_by_run(con, "math500", "math_verify", "pass@1")
        choices = queries.eval_choices(con)
        picked = queries.sample_count(con, c2_old, 100, queries.SampleFilter(benchmarks=("MATH500",)))
        index = queries.sample_index(con)
        curves = queries.eval_curves(con, [_run_id(m, s) for m, s in SPELLED], "math_verify")
        detail = queries.sample_detail(con, c2_old, 100, "math500", "p000", 0)
    assert scores is not None and scores.size == PROBLEMS and scores.mean() == pytest.approx(0.775)
    paper = load_reference()
    want = paper[(paper["table"] == "Table 1") & (paper["method"] == "co_rewarding_2")
                 & (paper["model"] == "Qwen3-8B-Base") & (paper["benchmark"] == "MATH500")]  # fmt: skip
    [row] = table[(table["method"] == "co_rewarding_2") & (table["model"] == "Qwen3-8B-Base")
                  & (table["benchmark"] == "MATH500")].to_dict("records")  # fmt: skip
    assert (row["paper"], row["measured"], row["seeds"]) == (float(want["value"].iloc[0]), 73.83, 3)
    assert row["interval"] == "seeds+problems"  # the per-problem samples of all three spellings were read
    [rel] = released.to_dict("records")
    assert (rel["benchmark"], rel["paper"], rel["released"]) == ("MATH500", row["paper"], 75.5)
    assert (rel["reproduced"], rel["reproduced_seeds"]) == (73.83, 3)
    assert sorted(by_run["run_id"]) == sorted(_run_id(m, s) for m, s in SPELLED)
    assert choices[["benchmark", "checker"]].drop_duplicates().values.tolist() == [["MATH500", "math_verify"]]
    assert picked == PROBLEMS * SAMPLES and set(index["benchmark"]) == {"MATH500"} and len(index) == 6
    assert set(curves["benchmark"]) == {"MATH500"} and len(curves) == 6
    assert detail == {"question": None, "gold": None, "response": None}  # found: the stored row has no text


# ---- the preview as docs/results.md writes it --------------------------------------------------------------------
PREVIEW = "/tmp/preview"


def _documented_preview() -> list[str]:
    """The preview commands of docs/results.md's claims section: results synthetic, claims, report."""
    text = (ROOT / "docs" / "results.md").read_text()
    section = text[text.index("## The paper's claims, checked") :]
    lines = [
        line.split("#")[0].strip() for line in section.splitlines() if PREVIEW in line and line.startswith(".venv")
    ]
    assert [shlex.split(line)[1] for line in lines] == ["results", "claims", "report"], lines
    return lines


@pytest.mark.slow
def test_the_documented_preview_finds_every_claims_cells(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The preview the docs give for the claims: every claim finds its cells (none "without a scored run", none
    priced as missing), and the report lists no stored cell as missing. Runs are shortened (--steps 10 --samples 8:
    the same 100 cells, each quicker to write)."""
    out = tmp_path / "preview"
    synthetic, claims, report = (shlex.split(line.replace(PREVIEW, str(out)))[1:] for line in _documented_preview())
    assert main([*synthetic, "--steps", "10", "--samples", "8"]) == 0
    capsys.readouterr()
    assert main(claims) == 0
    results = {r["id"]: r for r in json.loads(capsys.readouterr().out)}
    assert list(results) == [c.id for c in load_claims(config_dir() / "claims.yaml")]
    for result in results.values():
        assert result["missing"] == [] and "missing_gpu_hours" not in result, result
        assert "without" not in result["note"], result
    # 15 and 9 cells; the Qwen3-8B-Base and Llama rows hold three seeds each (paper_v3_seeds); the Qwen3-4B-Base row
    # one, and borrows from its DAPO-14k row's three (paper_v3_lenders), named with their df; the synthetic methods
    # score alike: undecided because the interval spans 0, with the seeds for 80% power
    for cid in ("co_rewarding_beats_self_rewarding", "co_rewarding_3_beats_1_and_2"):
        result = results[cid]
        assert result["verdict"] == "undecided" and result["low"] < 0 < result["high"], result
        assert result["variance"] == "problems+borrowed seed variance" and "the interval spans 0" in result["note"]
        assert result["seeds_needed"] is not None and result["power"] == 0.8 and result["df"] > 2
        lenders = {(d["cell"], d["df"]) for d in result["lenders"]}
        better = {f"{m}__qwen3-4b-base__dapo14k" for m in load_claims(config_dir() / "claims.yaml")[0].better}
        assert lenders and all(cell.endswith("__qwen3-4b-base__dapo14k") and df == 2 for cell, df in lenders)
        assert cid != "co_rewarding_beats_self_rewarding" or {cell for cell, _ in lenders} >= better
    counts = {cid: len(r["runs"]) for cid, r in results.items()}
    assert counts == {"co_rewarding_beats_self_rewarding": 35, "co_rewarding_3_beats_1_and_2": 21,
                      "co_rewarding_2_stays_stable": 4, "majority_voting_collapses": 4}  # fmt: skip
    for claim in load_claims(config_dir() / "claims.yaml"):
        found = {parse_cell_id(r.split("@")[0]).first_seed.cell_id for r in results[claim.id]["runs"]}
        assert found == {c.cell_id for c in claim.cells()}
    assert main(report) == 0
    html = (out / "report.html").read_text()
    with reader(out / "results.duckdb") as con:
        stored = {r[0] for r in con.execute("SELECT cell_id FROM runs").fetchall()}
    listed = [cell for part in re.findall(r"cells without runs: ([^;<]*)", html) for cell in part.split(", ")]
    assert [cell for cell in listed if cell in stored] == [] and listed == []
    assert "<dt>runs of the matrix in the store</dt><dd>72 (72 cells)</dd>" in html
    assert "<td>not run</td>" not in html
    assert re.search(r'id="claims">The paper\'s claims \(\d hold, \d do not, \d undecided\)', html)
