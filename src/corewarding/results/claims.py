"""The paper's claims as checks on the stored runs (``configs/claims.yaml``): holds, does not hold, or undecided at
the measured variance, with the effect, its interval, the cells used, and the seeds that would decide it.

A ``compare`` claim's effect is, averaged over its rows (base model x data set), the mean score of its ``better``
methods minus the mean of its ``worse`` ones on one benchmark (each cell's score: its newest run's newest evaluated
step, per problem the mean over samples of the checker's verdict, then over problems and seeds). Its interval is a
t interval at the Welch-Satterthwaite degrees of freedom of the cells' variances, each as ``seed_variance`` says:
from its seeds with two or more; with one seed, lent by the claim's cells of the same method, model family and size
(named with their degrees of freedom), or problems only, in which case the claim stays undecided. The rule is
calibrated by simulation (``calibration``). A ``stable`` claim reads the store's collapse rules up to a step. The
compare rule itself is ``claim_rule`` (pure), the store reads behind it ``claim_scores``.
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
from corewarding.results.cell_verdicts import SAMPLED_CHECKERS
from corewarding.results.checker_versions import sample_checker_versions
from corewarding.results.claim_rule import FAILS, HOLDS, UNDECIDED, decide
from corewarding.results.claim_scores import latest_runs, lender_cells, problem_scores
from corewarding.results.collapse import CollapseRules, collapse_events
from corewarding.results.names import benchmark_key
from corewarding.results.read import collapse_inputs
from corewarding.results.seed_variance import BORROWED, POWER, PROBLEMS_ONLY, lending_group
from corewarding.yaml_bounds import read_yaml

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
    seeds_needed: int | None = None  # per cell, to find the measured effect with probability ``power``
    note: str = ""
    df: float | None = None  # the interval's degrees of freedom (Welch-Satterthwaite)
    lenders: list[dict[str, Any]] = field(default_factory=list)  # the cells a one-seed cell borrowed from, with df
    per_seed_variance: float | None = None  # one seed's variance (seeds and problems), behind seeds_needed
    power: float = POWER

    def to_dict(self) -> dict[str, Any]:
        df = None if self.df is None or not math.isfinite(self.df) else round(self.df, 2)
        return {
            "id": self.claim.id, "table": self.claim.table, "text": self.claim.text, "verdict": self.verdict,
            "effect": self.effect, "low": self.low, "high": self.high, "df": df, "variance": self.variance,
            "lenders": self.lenders, "seeds": self.seeds, "runs": self.runs, "missing": self.missing,
            "seeds_needed": self.seeds_needed, "power": self.power, "assumed_effect": self.effect,
            "per_seed_variance": self.per_seed_variance, "note": self.note,
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


def claim_weights(claim: Claim) -> dict[str, float]:
    """Each cell's weight in a compare claim's effect: the mean over rows of (mean of better - mean of worse)."""
    weights: dict[str, float] = {}
    for b, d in claim.rows:
        for m in claim.better:
            weights[Cell(m, b, d).cell_id] = 1 / (len(claim.rows) * len(claim.better))
        for m in claim.worse:
            weights[Cell(m, b, d).cell_id] = -1 / (len(claim.rows) * len(claim.worse))
    return weights


def _compare(con: duckdb.DuckDBPyConnection, claim: Claim, checker: str) -> ClaimResult:
    scores = problem_scores(con, claim.cells(), str(claim.benchmark), checker)
    by_cell: dict[str, list[np.ndarray]] = {}
    for (cell, _), group in scores.groupby(["cell", "cell_id"], sort=True):
        by_cell.setdefault(str(cell), []).append(group["score"].to_numpy())
    missing = [c.cell_id for c in claim.cells() if c.cell_id not in by_cell]
    runs = sorted(scores["run_id"].unique().tolist())
    if missing:
        return ClaimResult(claim, UNDECIDED, runs=runs, missing=missing, note="cells without a scored run")
    versions = sample_checker_versions(con, runs, benchmark_key(str(claim.benchmark)), checker) - {None}
    if len(versions) > 1:  # verdicts of two versions of the checker's code are two measurements, never one claim
        shown = ", ".join(sorted(map(str, versions)))
        note = f"the samples were scored by {len(versions)} versions of {checker} ({shown}); score them with one"
        return ClaimResult(claim, UNDECIDED, runs=runs, note=note)
    lenders = [c for c in claim.cells() if len(by_cell[c.cell_id]) == 1]  # one-seed cells borrow from the store
    extra = [c for c in lender_cells(con, lenders) if c.cell_id not in by_cell] if lenders else []
    if extra:
        lent = problem_scores(con, extra, str(claim.benchmark), checker)
        for (cell, _), group in lent.groupby(["cell", "cell_id"], sort=True):
            by_cell.setdefault(str(cell), []).append(group["score"].to_numpy())
    groups = {c.cell_id: (c.method, lending_group(c.base_model)) for c in [*claim.cells(), *extra]}
    found = decide({c: a for c, a in by_cell.items() if c in groups}, claim_weights(claim), groups)
    if found.variance == PROBLEMS_ONLY:
        note = ("undecided (one seed): a cell has one seed and no cell of its method, model family and size has two "
                "to lend a seed variance; run more seeds")  # fmt: skip
    elif found.variance == BORROWED:
        note = "one-seed cells borrow the seed variance of their method, model family and size"
    else:
        note = ""
    if found.verdict == UNDECIDED and found.variance != PROBLEMS_ONLY:
        note = (note + "; " if note else "") + "the interval spans 0"
    return ClaimResult(
        claim, found.verdict, found.effect, found.low, found.high, found.variance,
        min(len(v) for v in by_cell.values()), runs, seeds_needed=found.seeds_needed, note=note, df=found.df,
        lenders=[{"cell": cell, "df": df} for cell, df in found.lenders],
        per_seed_variance=found.per_seed_variance,
    )  # fmt: skip


def _stable(con: duckdb.DuckDBPyConnection, claim: Claim, rules: CollapseRules) -> ClaimResult:
    runs = latest_runs(con, claim.cells())
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
    rules: CollapseRules = RULES,
) -> list[ClaimResult]:
    """Each claim's result on a read-only connection to the results store."""
    if checker not in CHECKERS:
        raise ValueError(f"checker={checker!r}: one of {', '.join(CHECKERS)}")
    return [_compare(con, c, checker) if c.kind == "compare" else _stable(con, c, rules) for c in claims]
