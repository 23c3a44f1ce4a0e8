"""The paper's claims as checks on the stored runs (``configs/claims.yaml``): holds, does not hold, or undecided at
the measured variance, with the effect, its interval, the cells used, and the seeds that would decide it.

A ``compare`` claim's effect is, averaged over its rows (base model x data set), the mean score of its ``better``
methods minus the mean of its ``worse`` ones on one benchmark (each cell's score: its newest run's newest evaluated
step, per problem the mean over samples of the checker's verdict, then over problems and seeds). The interval
resamples every cell as ``seed_variance`` says: seeds then problems with two or more seeds; with one seed, problems
plus a seed variance borrowed from the claim's cells of the same method and scale (labelled), or problems only, in
which case the claim stays undecided. A ``stable`` claim reads the store's collapse rules up to a step.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd

from corewarding.matrix import Cell
from corewarding.results.cell_verdicts import SAMPLED_CHECKERS, scale_of
from corewarding.results.collapse import CollapseRules, collapse_events
from corewarding.results.names import benchmark_key, key_sql
from corewarding.results.read import collapse_inputs
from corewarding.results.seed_variance import (
    BORROWED,
    PROBLEMS_ONLY,
    SEEDS_AND_PROBLEMS,
    pooled_seed_variance,
    seeds_to_decide,
    two_level_replicates,
)
from corewarding.yaml_bounds import read_yaml

HOLDS, FAILS, UNDECIDED = "holds", "does not hold", "undecided"
KINDS = ("compare", "stable")
CHECKERS = tuple(SAMPLED_CHECKERS)  # the checkers whose per-sample verdicts the store keeps
RULES = CollapseRules()  # the store's default collapse rules (the dashboard's and the report's)


class ClaimsError(ValueError):
    """A claims file that cannot be read; the message names the file, the claim and the key."""


@dataclass(frozen=True)
class Claim:
    """One claim of the paper, over the cells of its rows."""

    id: str
    text: str
    table: str
    kind: str
    rows: tuple[tuple[str, str], ...]  # (base_model, dataset)
    benchmark: str | None = None
    better: tuple[str, ...] = ()
    worse: tuple[str, ...] = ()
    method: str | None = None
    by_step: int | None = None
    collapses: bool = False

    def cells(self) -> list[Cell]:
        """The seed-0 cells the claim reads (a cell's other seeds are found in the store)."""
        methods = [*self.better, *self.worse] if self.kind == "compare" else [str(self.method)]
        return [Cell(m, b, d) for b, d in self.rows for m in methods]


@dataclass
class ClaimResult:
    """A claim's verdict and what it rests on."""

    claim: Claim
    verdict: str
    effect: float | None = None
    low: float | None = None
    high: float | None = None
    variance: str = ""
    seeds: int = 0  # the fewest seeds of any cell used
    runs: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # cell ids (seed 0) the store has no scored run of
    seeds_needed: int | None = None
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.claim.id, "table": self.claim.table, "text": self.claim.text, "verdict": self.verdict,
            "effect": self.effect, "low": self.low, "high": self.high, "variance": self.variance, "seeds": self.seeds,
            "runs": self.runs, "missing": self.missing, "seeds_needed": self.seeds_needed, "note": self.note,
        }  # fmt: skip


def _need(path: Path, claim_id: str, entry: dict[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
    value = entry.get(key)
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        raise ClaimsError(f"{path}: claim {claim_id!r}: {key}={value!r} is missing or of the wrong type")
    return value


def _names(path: Path, claim_id: str, entry: dict[str, Any], key: str) -> tuple[str, ...]:
    value = _need(path, claim_id, entry, key, list)
    if not value or not all(isinstance(v, str) for v in value):
        raise ClaimsError(f"{path}: claim {claim_id!r}: {key} must be a non-empty list of names")
    return tuple(value)


def load_claims(path: Path) -> list[Claim]:
    """The claims of ``path``; a malformed one is a ClaimsError naming the claim and the key."""
    raw = read_yaml(path, ClaimsError)  # bounded: ``claims --file`` takes any path
    entries = raw.get("claims") if isinstance(raw, dict) else None
    if not isinstance(entries, list) or not entries:
        raise ClaimsError(f"{path}: expected a non-empty list under 'claims'")
    claims: list[Claim] = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
            raise ClaimsError(f"{path}: claim {i} needs an id")
        cid = entry["id"]
        kind = entry.get("kind")
        if kind not in KINDS:
            raise ClaimsError(f"{path}: claim {cid!r}: kind={kind!r} must be one of {', '.join(KINDS)}")
        rows = _need(path, cid, entry, "rows", list)
        if not rows or not all(isinstance(r, dict) and {"base_model", "dataset"} <= set(r) for r in rows):
            raise ClaimsError(f"{path}: claim {cid!r}: rows must list {{base_model, dataset}} mappings")
        common = {
            "id": cid, "text": str(_need(path, cid, entry, "text", str)), "kind": kind,
            "table": str(_need(path, cid, entry, "table", str)),
            "rows": tuple((str(r["base_model"]), str(r["dataset"])) for r in rows),
        }  # fmt: skip
        if kind == "compare":
            benchmark = str(_need(path, cid, entry, "benchmark", str))
            better, worse = _names(path, cid, entry, "better"), _names(path, cid, entry, "worse")
            claims.append(Claim(**common, benchmark=benchmark, better=better, worse=worse))
        else:
            by_step = _need(path, cid, entry, "by_step", int)
            if by_step < 1:
                raise ClaimsError(f"{path}: claim {cid!r}: by_step={by_step} must be >= 1")
            claims.append(Claim(**common, method=str(_need(path, cid, entry, "method", str)), by_step=by_step,
                                collapses=bool(entry.get("collapses", False))))  # fmt: skip
    if len({c.id for c in claims}) != len(claims):
        raise ClaimsError(f"{path}: two claims share an id")
    return claims


# ---- reading the store -------------------------------------------------------------------------------------------
# The newest run of each of the cells and their seeds (the store's ``run_seeds`` groups a cell's seeds)
LATEST = """WITH latest AS (
    SELECT r.run_id, r.cell_id, run_seeds.cell_group AS cell, r.last_step,
        row_number() OVER (PARTITION BY r.cell_id ORDER BY r.started_at DESC NULLS LAST, r.run_id DESC) AS k
    FROM runs r JOIN run_seeds USING (run_id) WHERE list_contains(?, run_seeds.cell_group))"""


def problem_scores(con: duckdb.DuckDBPyConnection, cells: Sequence[Cell], benchmark: str, checker: str) -> pd.DataFrame:
    """Per cell (seed 0's id) and seed: the newest run's per-problem scores at its newest step evaluated on
    ``benchmark`` (the mean over samples of the checker's verdict): cell, cell_id, run_id, problem_id, score.
    ``benchmark`` matches every spelling of it (``names.benchmark_key``: ``math500`` finds ``MATH500``)."""
    column = SAMPLED_CHECKERS[checker]
    return con.execute(
        LATEST
        + f""", picked AS (SELECT * FROM latest WHERE k = 1),
        scored AS (
            SELECT s.run_id, s.step, s.problem_id, s.{column} AS verdict FROM eval_samples s
            WHERE list_contains((SELECT list(run_id) FROM picked), s.run_id) AND {key_sql("s.benchmark")} = ?),
        newest AS (SELECT run_id, max(step) AS step FROM scored GROUP BY run_id)
        SELECT l.cell, l.cell_id, s.run_id, s.problem_id, avg(s.verdict::DOUBLE) AS score
        FROM scored s JOIN newest n USING (run_id, step) JOIN picked l USING (run_id)
        GROUP BY ALL ORDER BY l.cell_id, s.problem_id""",
        [[c.cell_id for c in cells], benchmark_key(benchmark)],
    ).fetchdf()


def _latest_runs(con: duckdb.DuckDBPyConnection, cells: Sequence[Cell]) -> pd.DataFrame:
    return con.execute(
        LATEST + " SELECT run_id, cell_id, cell, last_step FROM latest WHERE k = 1", [[c.cell_id for c in cells]]
    ).fetchdf()


# ---- evaluating ----------------------------------------------------------------------------------------------------
def _cell_replicates(
    seeds: list[np.ndarray], borrowed: float | None, samples: int, rng: np.random.Generator
) -> tuple[np.ndarray, str]:
    """A cell's bootstrap replicates of its score, and what their spread holds."""
    if len(seeds) >= 2:
        return two_level_replicates(seeds, samples, int(rng.integers(1 << 31))), SEEDS_AND_PROBLEMS
    scores = seeds[0]
    draws = rng.integers(0, scores.size, (samples, scores.size))
    replicates = scores[draws].mean(axis=1)
    if borrowed is None:
        return replicates, PROBLEMS_ONLY
    return replicates + rng.normal(0.0, math.sqrt(borrowed), samples), BORROWED


def _compare(con: duckdb.DuckDBPyConnection, claim: Claim, checker: str, samples: int, rng_seed: int) -> ClaimResult:
    scores = problem_scores(con, claim.cells(), str(claim.benchmark), checker)
    by_cell: dict[str, list[np.ndarray]] = {}
    for (cell, _), group in scores.groupby(["cell", "cell_id"], sort=True):
        by_cell.setdefault(str(cell), []).append(group["score"].to_numpy())
    missing = [c.cell_id for c in claim.cells() if c.cell_id not in by_cell]
    runs = sorted(scores["run_id"].unique().tolist())
    if missing:
        return ClaimResult(claim, UNDECIDED, runs=runs, missing=missing, note="cells without a scored run")
    seed_means = {cell: [float(s.mean()) for s in seeds] for cell, seeds in by_cell.items()}
    by_scale: dict[tuple[str, str], list[list[float]]] = {}  # (method, scale) -> its cells' seed means
    for cell in claim.cells():
        by_scale.setdefault((cell.method, scale_of(cell.base_model)), []).append(seed_means[cell.cell_id])
    pooled = {key: pooled_seed_variance(cells) for key, cells in by_scale.items()}
    rng = np.random.default_rng(rng_seed)
    replicates: dict[str, np.ndarray] = {}
    sources: set[str] = set()
    for cell in claim.cells():
        borrowed = pooled[(cell.method, scale_of(cell.base_model))]
        replicates[cell.cell_id], source = _cell_replicates(by_cell[cell.cell_id], borrowed, samples, rng)
        sources.add(source)

    def effect_of(value: dict[str, Any]) -> Any:
        rows = [
            np.mean([value[Cell(m, b, d).cell_id] for m in claim.better], axis=0)
            - np.mean([value[Cell(m, b, d).cell_id] for m in claim.worse], axis=0)
            for b, d in claim.rows
        ]
        return np.mean(rows, axis=0)

    effect = float(effect_of({c: float(np.mean(v)) for c, v in seed_means.items()}))
    low, high = (float(x) for x in np.quantile(effect_of(replicates), [0.025, 0.975]))
    variance = next(s for s in (PROBLEMS_ONLY, BORROWED, SEEDS_AND_PROBLEMS) if s in sources)  # the weakest
    if variance == PROBLEMS_ONLY:
        verdict, note = UNDECIDED, "one seed and no seed variance to borrow: run more seeds"
    else:
        verdict = HOLDS if low > 0 else FAILS if high < 0 else UNDECIDED
        note = (
            ""
            if variance == SEEDS_AND_PROBLEMS
            else "one-seed cells borrow the seed variance of their method and scale"
        )
    known = [v for v in pooled.values() if v is not None]
    needed = None
    if known:  # the effect's variance with n seeds per cell is c sigma^2 / n, c = (1/|better| + 1/|worse|) / rows
        c = (1 / len(claim.better) + 1 / len(claim.worse)) / len(claim.rows)
        needed = seeds_to_decide(effect, math.sqrt(c * float(np.mean(known)) / 2))
    return ClaimResult(claim, verdict, effect, low, high, variance, min(len(v) for v in by_cell.values()), runs,
                       seeds_needed=needed, note=note)  # fmt: skip


def _stable(con: duckdb.DuckDBPyConnection, claim: Claim, rules: CollapseRules) -> ClaimResult:
    runs = _latest_runs(con, claim.cells())
    missing = [c.cell_id for c in claim.cells() if c.cell_id not in set(runs["cell"])]
    ids = runs["run_id"].tolist()
    events = collapse_events(collapse_inputs(con, ids), rules) if ids else pd.DataFrame(columns=["run_id", "step"])
    by_step = int(claim.by_step or 0)
    collapsed = set(events.loc[events["step"] <= by_step, "run_id"]) if len(events) else set()
    reached = set(runs.loc[runs["last_step"].fillna(0) >= by_step, "run_id"])
    per_row = [runs[runs["cell"] == c.cell_id] for c in claim.cells()]
    share = len(collapsed) / len(ids) if ids else None
    seeds = min((len(r) for r in per_row if len(r)), default=0)
    result = ClaimResult(claim, UNDECIDED, share, variance="collapse rules", seeds=seeds, runs=sorted(ids),
                         missing=missing)  # fmt: skip
    if missing:
        result.note = "cells without a run"
        return result
    if claim.collapses:  # every row has a seed that collapses by the step
        if all(set(r["run_id"]) & collapsed for r in per_row):
            result.verdict = HOLDS
        elif any(set(r["run_id"]) <= reached - collapsed for r in per_row):
            result.verdict = FAILS
    elif collapsed:
        result.verdict = FAILS
    elif set(ids) <= reached:
        result.verdict = HOLDS
    if result.verdict == UNDECIDED:
        result.note = f"runs have not reached step {by_step}"
    return result


def evaluate_claims(
    con: duckdb.DuckDBPyConnection,
    claims: Sequence[Claim],
    checker: str = "math_verify",
    samples: int = 2000,
    rng_seed: int = 0,
    rules: CollapseRules = RULES,
) -> list[ClaimResult]:
    """Each claim's result on a read-only connection to the results store."""
    if checker not in CHECKERS:
        raise ValueError(f"checker={checker!r}: one of {', '.join(CHECKERS)}")
    return [
        _compare(con, c, checker, samples, rng_seed) if c.kind == "compare" else _stable(con, c, rules) for c in claims
    ]
