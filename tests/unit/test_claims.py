"""The paper's claims checked on stores the tests build: a claim that holds, one that does not, one undecided at one
seed and decided at three, a stable claim, missing cells named, and the shipped claims file read."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import numpy as np
import pytest

from corewarding.config import config_dir
from corewarding.matrix import Cell
from corewarding.results.claim_rule import FAILS, HOLDS, UNDECIDED
from corewarding.results.claims import Claim, ClaimResult, ClaimsError, evaluate_claims, load_claims
from corewarding.results.ingest.ingestion import ensure_reference
from corewarding.results.report.build import build_report
from corewarding.results.store.store import reader, writer

ROWS = (("qwen3-8b-base", "math"),)
PROBLEMS = 200


def _run(con: duckdb.DuckDBPyConnection, cell: Cell, rate: float, seed: int, step: int = 100) -> None:
    """A finished run of ``cell`` whose ``PROBLEMS`` math500 problems are right at ``rate`` (4 samples each)."""
    run_id = f"{cell.cell_id}@{seed:08x}"
    con.execute(
        "INSERT INTO runs (run_id, cell_id, method, base_model, dataset, status, started_at, last_step) "
        "VALUES (?, ?, ?, ?, ?, 'finished', now(), ?)",
        [run_id, cell.cell_id, cell.method, cell.base_model, cell.dataset, step],
    )
    right = np.random.default_rng(seed).random((PROBLEMS, 4)) < rate
    rows = [(run_id, step, "math500", str(p), k, bool(right[p, k]), bool(right[p, k]))
            for p in range(PROBLEMS) for k in range(4)]  # fmt: skip
    con.executemany(
        "INSERT INTO eval_samples (run_id, step, benchmark, problem_id, sample_index, correct_strict, "
        "correct_math_verify) VALUES (?, ?, ?, ?, ?, ?, ?)",
        rows,
    )


def _store(tmp_path: Path, rates: dict[str, list[float]]) -> Path:
    """One run per (method, seed): ``rates[method]`` gives each seed's accuracy (seed k: cell ``__seed<k>``)."""
    db = tmp_path / "claims.duckdb"
    with writer(db) as con:
        for i, (method, per_seed) in enumerate(rates.items()):
            for k, rate in enumerate(per_seed):
                _run(con, Cell(method, *ROWS[0], k), rate, seed=100 * i + k)  # fixed draws: the same store each run
    return db


# three seeds each: Co-rewarding-II well above Majority-Voting, and the claims-file entry that says so
II_OVER_MV = {"co_rewarding_2": [0.70, 0.72, 0.69], "majority_voting": [0.40, 0.45, 0.38]}
II_BEATS_MV = (
    "  - {id: ii_beats_mv, kind: compare, text: II beats MV, table: T1, benchmark: math500,\n"
    "     better: [co_rewarding_2], worse: [majority_voting], rows: [{base_model: qwen3-8b-base, dataset: math}]}\n"
)


def _claim(better: str = "co_rewarding_2", worse: str = "majority_voting") -> Claim:
    return Claim("c", "II beats MV", "Table 1", "compare", ROWS, "math500", (better,), (worse,))


def _evaluate(db: Path, claim: Claim) -> ClaimResult:
    with reader(db) as con:
        [result] = evaluate_claims(con, [claim])
    return result


def test_a_claim_that_holds_and_one_that_does_not(tmp_path: Path) -> None:
    db = _store(tmp_path, II_OVER_MV)
    holds = _evaluate(db, _claim())
    assert holds.verdict == HOLDS and holds.variance == "seeds+problems" and holds.seeds == 3
    assert 0.2 < holds.effect < 0.35 and holds.low > 0 and len(holds.runs) == 6
    reverse = _evaluate(db, _claim("majority_voting", "co_rewarding_2"))
    assert reverse.verdict == FAILS and reverse.high < 0


def test_undecided_at_one_seed_decided_at_three(tmp_path: Path) -> None:
    """The same cells, first with their seed 0 alone: the spread between runs is unknown, so the claim stays
    undecided however large the effect looks; their three seeds measure it and decide."""
    one = _store(tmp_path / "one", {"co_rewarding_2": [0.70], "majority_voting": [0.55]})
    alone = _evaluate(one, _claim())
    assert alone.verdict == UNDECIDED and alone.variance == "problems only"
    assert "run more seeds" in alone.note
    three = _store(tmp_path / "three", {"co_rewarding_2": [0.70, 0.72, 0.69], "majority_voting": [0.55, 0.56, 0.54]})
    decided = _evaluate(three, _claim())
    assert decided.verdict == HOLDS and decided.seeds == 3
    assert decided.seeds_needed is not None and decided.seeds_needed >= 2


def test_a_one_seed_row_borrows_only_within_its_method_family_and_size(tmp_path: Path) -> None:
    """Qwen3-8B-Base on MATH has three seeds of each method; a second row with one seed each borrows them when it is
    the same family and size (Qwen3-8B-Base on DAPO-14k), naming the lenders and their df, and stays undecided (one
    seed) when it is another family of a similar size (Qwen2.5-7B: the mismatched lender)."""
    results = {}
    for other in (("qwen3-8b-base", "dapo14k"), ("qwen2.5-7b", "math")):
        db = tmp_path / f"{other[0]}.duckdb"
        with writer(db) as con:
            for i, (method, rates) in enumerate(II_OVER_MV.items()):
                for k, rate in enumerate(rates):
                    _run(con, Cell(method, *ROWS[0], k), rate, seed=100 * i + k)
                _run(con, Cell(method, *other), rates[0], seed=100 * i + 50)
        claim = Claim("c", "II beats MV", "Table 1", "compare", (*ROWS, other), "math500",
                      ("co_rewarding_2",), ("majority_voting",))  # fmt: skip
        results[other[0]] = _evaluate(db, claim)
    same, other_family = results["qwen3-8b-base"], results["qwen2.5-7b"]
    assert same.variance == "problems+borrowed seed variance" and same.verdict == HOLDS and same.seeds == 1
    assert same.to_dict()["lenders"] == [{"cell": "co_rewarding_2__qwen3-8b-base__math", "df": 2},
                                         {"cell": "majority_voting__qwen3-8b-base__math", "df": 2}]  # fmt: skip
    assert same.df is not None and 2 <= same.df < 10  # Welch-Satterthwaite over the cells' df
    assert other_family.variance == "problems only" and other_family.verdict == UNDECIDED
    assert other_family.note.startswith("undecided (one seed)") and other_family.lenders == []


def test_missing_cells_are_named_and_a_stable_claim_reads_the_collapse_rules(tmp_path: Path) -> None:
    db = _store(tmp_path, {"co_rewarding_2": [0.7]})
    missing = _evaluate(db, _claim())
    assert missing.verdict == UNDECIDED and missing.missing == ["majority_voting__qwen3-8b-base__math"]
    stable = Claim("s", "II stays stable", "Fig. 1", "stable", ROWS, method="co_rewarding_2", by_step=50)
    collapses = Claim("m", "II collapses", "Fig. 1", "stable", ROWS, method="co_rewarding_2", by_step=50,
                      collapses=True)  # fmt: skip
    with writer(db) as con:  # validation accuracy that climbs, then one that falls far below its peak by step 40
        run_id = con.execute("SELECT run_id FROM runs").fetchone()[0]  # type: ignore[index]
        for step, value in [(0, 0.3), (10, 0.5), (20, 0.55), (30, 0.56), (40, 0.57)]:
            con.execute("INSERT INTO training_metrics VALUES (?, 'val_accuracy', ?, ?)", [run_id, step, value])
    with reader(db) as con:
        held, claimed = evaluate_claims(con, [stable, collapses])
    assert held.verdict == HOLDS and claimed.verdict == FAILS
    with writer(db) as con:
        con.execute("UPDATE training_metrics SET value = 0.1 WHERE step = 40")
    with reader(db) as con:
        held, claimed = evaluate_claims(con, [stable, collapses])
    assert held.verdict == FAILS and claimed.verdict == HOLDS and held.effect == 1.0


def test_the_shipped_claims_file_reads_and_a_bad_one_names_the_claim_and_key(tmp_path: Path) -> None:
    claims = load_claims(config_dir() / "claims.yaml")
    assert {c.kind for c in claims} == {"compare", "stable"} and all(c.table for c in claims)
    assert claims[0].cells()[0] == Cell("co_rewarding_1", "qwen3-8b-base", "math")
    bad = tmp_path / "claims.yaml"
    bad.write_text("claims:\n  - {id: x, kind: compare, text: t, table: T, rows: [{base_model: a, dataset: b}]}\n")
    with pytest.raises(ClaimsError, match=r"claim 'x': benchmark=None is missing"):
        load_claims(bad)
    bad.write_text("claims:\n  - {id: y, kind: vibes}\n")
    with pytest.raises(ClaimsError, match=r"claim 'y': kind='vibes' must be one of compare, stable"):
        load_claims(bad)


def test_the_claims_command_prints_each_verdict_and_prices_missing_cells(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from corewarding.cli.main import main

    db = _store(tmp_path, II_OVER_MV)
    claims = tmp_path / "claims.yaml"
    claims.write_text(
        "claims:\n"
        + II_BEATS_MV
        + "  - {id: iii_beats_ii, kind: compare, text: III beats II, table: v3, benchmark: math500,\n"
        "     better: [co_rewarding_3], worse: [co_rewarding_2], rows: [{base_model: qwen3-8b-base, dataset: math}]}\n"
    )
    assert main(["claims", "--db", str(db), "--file", str(claims)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("HOLDS          ii_beats_mv (T1): II beats MV") and "seeds+problems; fewest seeds 3" in out
    assert "UNDECIDED      iii_beats_ii" in out
    assert "would be decided by co_rewarding_3__qwen3-8b-base__math (about " in out  # priced by the dry run
    assert main(["claims", "--db", str(db), "--file", str(claims), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["verdict"] for r in rows] == [HOLDS, UNDECIDED] and rows[1]["missing_gpu_hours"] > 0
    assert main(["claims", "--db", str(tmp_path / "none.duckdb"), "--file", str(claims)]) == 2


def test_the_report_opens_with_the_claims(tmp_path: Path) -> None:
    db = _store(tmp_path, {"co_rewarding_2": [0.70, 0.72, 0.69]})
    with writer(db) as con:  # the report needs the paper's numbers, as an ingest loads them
        ensure_reference(con)
    page = build_report(db, "paper_v3")
    section = page[page.index('<h2 id="claims">') : page.index("</table>", page.index('<h2 id="claims">'))]
    assert page.index("</dl>") < page.index('<h2 id="claims">') == page.index("<h2")  # the first section
    assert "The paper's claims (0 hold, 0 do not, 4 undecided)" in section
    assert "cells without runs: co_rewarding_1__qwen3-8b-base__math" in section


def test_a_claim_never_mixes_two_versions_of_its_checker(tmp_path: Path) -> None:
    """Three seeds of each method, one seed's samples scored by another version of math_verify: undecided, naming
    both versions; with one version the same store decides."""
    db = _store(tmp_path, II_OVER_MV)
    with writer(db) as con:
        con.execute("UPDATE eval_samples SET checker_version_math_verify = 'math_verify 0.9.0+a1'")
    assert _evaluate(db, _claim()).verdict == HOLDS
    with writer(db) as con:
        con.execute(
            "UPDATE eval_samples SET checker_version_math_verify = 'math_verify 0.9.0+b2' "
            "WHERE run_id LIKE 'majority_voting%seed1%'"
        )
    mixed = _evaluate(db, _claim())
    assert mixed.verdict == UNDECIDED and mixed.effect is None
    assert "2 versions of math_verify (math_verify 0.9.0+a1, math_verify 0.9.0+b2)" in mixed.note


def test_a_one_seed_claim_borrows_from_seeded_cells_of_the_store_outside_the_claim(tmp_path: Path) -> None:
    """The claim's only row has one seed per method; the store also holds the same methods on Qwen3-8B-Base x
    DAPO-14k with three seeds (not part of the claim): the row borrows from them, named with their df. Seeded cells
    of another family (Qwen2.5-7B) lend nothing."""
    results = {}
    for lender in (("qwen3-8b-base", "dapo14k"), ("qwen2.5-7b", "math")):
        db = tmp_path / f"{lender[0]}.duckdb"
        with writer(db) as con:
            for i, (method, rates) in enumerate(
                {"co_rewarding_2": [0.70, 0.73, 0.69], "majority_voting": [0.40, 0.44, 0.38]}.items()
            ):
                _run(con, Cell(method, *ROWS[0]), rates[0], seed=100 * i + 50)
                for k, rate in enumerate(rates):
                    _run(con, Cell(method, *lender, k), rate, seed=100 * i + k)
        results[lender[0]] = _evaluate(db, _claim())
    borrowed, other = results["qwen3-8b-base"], results["qwen2.5-7b"]
    assert borrowed.variance == "problems+borrowed seed variance" and borrowed.verdict == HOLDS
    assert [(d["cell"], d["df"]) for d in borrowed.lenders] == [
        ("co_rewarding_2__qwen3-8b-base__dapo14k", 2), ("majority_voting__qwen3-8b-base__dapo14k", 2),
    ]  # fmt: skip
    assert borrowed.runs == sorted(borrowed.runs) and all("dapo14k" not in r for r in borrowed.runs)  # lenders lend
    assert other.variance == "problems only" and other.verdict == UNDECIDED and other.lenders == []
