"""A cell's score over its seeds, its interval and its verdict against a value, by ``seed_variance``'s rule.

Every paper cell, and every reproduction beside a released checkpoint, is read here: the newest run of each of the
cell's seeds (the store's ``run_seeds``), at the checkpoint the policy picks, averaged over seeds. Its interval:

- two or more seeds: the mean of the seeds' values with a t interval at ``k - 1`` degrees of freedom, its per-seed
  variance the seeds' sample variance and at least their mean problem variance (read from each evaluation's stored
  problem interval), as ``seed_variance`` says;
- one seed: the evaluation's problem interval, widened to the t interval of the per-seed variance lent by the
  store's cells of the same method, model family and size (benchmark and metric) with two or more seeds, at the
  lenders' degrees of freedom and labelled with their names; or the problem interval alone, on which the verdict
  is ``undecided``, never ``outside``;
- a base model (no training run, so no seed variance): the problem interval, decisive.

Values are fractions here; the callers print percent.
"""

from __future__ import annotations

from collections.abc import Sequence

import duckdb
import numpy as np
import pandas as pd

from corewarding.eval_rows import PREFERRED_CHECKERS, verdict_column
from corewarding.results.names import key_sql, name_sql
from corewarding.results.seed_variance import (
    DIFFERS,
    MATCHES,
    Interval,
    Lent,
    cell_spread,
    lend,
    lending_group,
    one_seed_interval,
    spread_interval,
    variance_from_interval,
    verdict,
)

Con = duckdb.DuckDBPyConnection
BASE_MODEL = "problems (base model: no training seed)"
SAMPLED_CHECKERS = {c: verdict_column(c) for c in PREFERRED_CHECKERS}  # checker -> its sample column
PolicyKey = tuple[str, str, str, str, str]  # method, base_model, dataset, benchmark_key, metric
Pooled = dict[tuple[str, str, str, str], Lent]  # (method, lending group, benchmark_key, metric) -> lent variance

# The newest run of every seed cell, at the step the policy picks, per benchmark and metric.
# Benchmarks are matched by ``names.key_sql`` and shown by ``names.name_sql``, so rows stored under another spelling
# (before names were canonical) are found and named as the rest.
_SEEDS_SQL = f"""
WITH scored AS (SELECT *, {key_sql("benchmark")} AS bkey FROM eval_metrics
    WHERE checker = $checker AND step IS NOT NULL AND value IS NOT NULL)
SELECT s.cell_group, r.cell_id, s.seed_index, r.method, r.base_model, r.dataset, r.run_id, e.step,
       {name_sql("e.benchmark")} AS benchmark, e.bkey AS benchmark_key, e.metric, e.value, e.ci_low, e.ci_high, e.n,
       e.num_problems
FROM scored e JOIN runs r USING (run_id) JOIN run_seeds s USING (run_id)
QUALIFY row_number() OVER (PARTITION BY r.cell_id, e.bkey, e.metric ORDER BY r.started_at DESC NULLS LAST,
    r.run_id, CASE WHEN $policy = 'best' THEN e.value ELSE e.step END DESC) = 1
ORDER BY s.cell_group, s.seed_index
"""


def seed_scores(con: Con, checker: str, policy: str) -> pd.DataFrame:
    """Every seed cell's newest run at its ``latest`` (last evaluated) or ``best`` (highest value) step, per
    benchmark and metric: cell_group, cell_id, seed_index, method, base_model, dataset, run_id, step, benchmark,
    benchmark_key, metric, value, ci_low, ci_high, n, num_problems."""
    if policy not in ("latest", "best"):
        raise ValueError(f"policy={policy!r}: latest or best")
    frame = con.execute(_SEEDS_SQL, {"checker": checker, "policy": policy}).fetchdf()
    frame["problem_variance"] = _problem_variance_column(frame)  # once for every row, not once per cell
    return frame


def _problem_variances(seeds: pd.DataFrame) -> list[float]:
    """Each seed's problem variance of its score (seeds without a problem interval left out)."""
    return [float(v) for v in _problem_variance_column(seeds) if not np.isnan(v)]


def pooled_variances(seeds: pd.DataFrame) -> Pooled:
    """Per (method, lending group, benchmark_key, metric): the per-seed variance lent by the cells with two or more
    seeds, pooled with its degrees of freedom and lenders (``seed_variance.lend``); keys without such a cell are
    absent."""
    cells: dict[tuple[str, str, str, str], dict[str, tuple[list[float], list[float]]]] = {}
    keys = ["method", "base_model", "benchmark_key", "metric", "cell_group"]
    values = seeds["value"].astype(float).to_numpy()
    problems = _problem_variance_column(seeds)
    for (method, base_model, key, metric, group), rows in seeds.groupby(keys, sort=True).indices.items():
        if len(rows) < 2:  # one-seed cells add nothing
            continue
        lender = (str(method), lending_group(str(base_model)), str(key), str(metric))
        known = [float(v) for v in problems[rows] if not np.isnan(v)]
        cells.setdefault(lender, {})[str(group)] = (values[rows].tolist(), known)
    lent = {key: lend(members) for key, members in cells.items()}
    return {key: value for key, value in lent.items() if value is not None}


def _problem_variance_column(seeds: pd.DataFrame) -> np.ndarray:
    """Each row's problem variance from its stored 95% problem interval (NaN without one), for all rows at once: the
    ``problem_variance`` column ``seed_scores`` adds, else computed here (rows renamed from other readers)."""
    if "problem_variance" in seeds:
        return seeds["problem_variance"].to_numpy(dtype=float)
    low = pd.to_numeric(seeds["ci_low"], errors="coerce").to_numpy(dtype=float)
    high = pd.to_numeric(seeds["ci_high"], errors="coerce").to_numpy(dtype=float)
    return variance_from_interval(low, high)


def cell_interval(seeds: pd.DataFrame, borrowed: Lent | None, confidence: float = 0.95) -> Interval | None:
    """The interval of one cell on one benchmark and metric from its ``seed_scores`` rows (one per seed); None when
    a one-seed cell's evaluation stored no interval."""
    if len(seeds) >= 2:
        values = seeds["value"].astype(float).tolist()
        return spread_interval(cell_spread(values, _problem_variances(seeds), None), confidence)
    row = seeds.iloc[0]
    if pd.isna(row["ci_low"]) or pd.isna(row["ci_high"]):
        return None
    return one_seed_interval(float(row["value"]), float(row["ci_low"]), float(row["ci_high"]), borrowed, confidence)


def base_interval(value: float, low: float | None, high: float | None) -> Interval | None:
    """A base model's interval: its problem interval, decisive (no training run, so no seed variance)."""
    if low is None or high is None or pd.isna(low) or pd.isna(high):
        return None
    return Interval(value, float(low), float(high), 0, BASE_MODEL)


# The verdicts in the report's and the dashboard's words
WITHIN, OUTSIDE, UNDECIDED = "within CI", "outside CI", "undecided (one seed)"
NO_CI, NOT_MEASURED = "no CI", "not measured"
VERDICT_WORDS = {MATCHES: WITHIN, DIFFERS: OUTSIDE}
# How a cell's interval is made, in the words the report and the paper page both print
INTERVAL_RULE = (
    "A trained cell's 95% interval is a t interval over its seeds (k - 1 degrees of freedom) that holds seed and "
    "problem variance; a cell with one seed borrows the seed variance of cells of the same method, model family and "
    "size with two or more seeds, at their degrees of freedom (the interval column names them), or keeps its problem "
    "interval alone."
)
MEANINGS = {
    WITHIN: "the paper's value lies inside the cell's interval",
    OUTSIDE: "the paper's value lies outside an interval that holds seed variance (measured, or borrowed from cells "
    "of the same method, model family and size, named with their degrees of freedom), or outside a base model's "
    "problem interval",
    UNDECIDED: "outside the problem interval of a cell with one seed and no seed variance to borrow: run more seeds",
}


def verdict_of(paper: float | None, measured: float | None, interval: Interval | None) -> str:
    """A cell's verdict: the paper's value against the measured interval (the same units)."""
    if measured is None:
        return NOT_MEASURED
    if interval is None or paper is None:
        return NO_CI
    return VERDICT_WORDS.get(verdict(paper, interval), UNDECIDED)


def in_percent(interval: Interval | None) -> Interval | None:
    """An interval of fractions in percent, rounded to two decimals as the report and the dashboard print it."""
    if interval is None:
        return None
    low, high, estimate = (round(v * 100, 2) for v in (interval.low, interval.high, interval.estimate))
    return Interval(estimate, low, high, interval.seeds, interval.source, interval.df, interval.lenders)


KEY = ["method", "base_model", "dataset", "benchmark_key", "metric"]  # the columns of a PolicyKey


def seeds_by_key(seeds: pd.DataFrame, wanted: pd.DataFrame) -> dict[PolicyKey, pd.DataFrame]:
    """The ``seed_scores`` rows of each cell (method, base_model, dataset) on a benchmark key and metric, for the
    keys in ``wanted`` (a frame with the ``KEY`` columns)."""
    rows = seeds.merge(wanted[KEY].drop_duplicates(), on=KEY)
    groups = rows.groupby(KEY, sort=False)
    return {(str(m), str(b), str(d), str(k), str(t)): group for (m, b, d, k, t), group in groups}


def borrowed_for(pooled: Pooled, key: PolicyKey) -> Lent | None:
    """The per-seed variance a one-seed cell of ``key`` borrows (None: no cell of its method, model family and size
    has two seeds on that benchmark and metric)."""
    method, base_model, _, benchmark_key, metric = key
    return pooled.get((method, lending_group(base_model), benchmark_key, metric))


def steps_text(steps: Sequence[float | int | None]) -> str:
    """The checkpoint steps of a cell's seeds: one step, or each seed's, e.g. ``40`` or ``40/38``."""
    shown = [str(int(s)) for s in steps if s is not None and not pd.isna(s)]
    return shown[0] if len(set(shown)) == 1 else "/".join(shown)
