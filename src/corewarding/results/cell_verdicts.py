"""A cell's score over its seeds, its interval and its verdict against a value, by ``seed_variance``'s rule.

Every paper cell, and every reproduction beside a released checkpoint, is read here: the newest run of each of the
cell's seeds (the store's ``run_seeds``), at the checkpoint the policy picks, averaged over seeds. Its interval:

- two or more seeds: the two-level bootstrap over seeds, then problems, on the stored per-problem samples of a mean
  metric (pass@1, avg@k); a normal approximation from the seeds' values and problem intervals for other metrics or
  where the samples are not stored;
- one seed: the evaluation's problem interval widened by the seed variance pooled over the store's cells of the same
  method and scale (benchmark and metric) with two or more seeds, labelled as borrowed; or the problem interval alone,
  on which the verdict is ``undecided``, never ``outside``;
- a base model (no training run, so no seed variance): the problem interval, decisive.

Values are fractions here; the callers print percent.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cache
from statistics import NormalDist

import duckdb
import numpy as np
import pandas as pd

from corewarding.config import config_dir, load_group_option
from corewarding.results.names import benchmark_key, key_sql, name_sql
from corewarding.results.seed_variance import (
    DIFFERS,
    MATCHES,
    Interval,
    one_seed_interval,
    pooled_seed_variance,
    two_level_bootstrap,
    verdict,
)

Con = duckdb.DuckDBPyConnection
BASE_MODEL = "problems (base model: no training seed)"
APPROXIMATE = "seeds+problems (normal approximation: no per-problem samples)"
SAMPLED_CHECKERS = {"math_verify": "correct_math_verify", "strict": "correct_strict"}
PolicyKey = tuple[str, str, str, str, str]  # method, base_model, dataset, benchmark_key, metric
Pooled = dict[tuple[str, str, str, str], float]  # (method, scale, benchmark_key, metric) -> pooled seed variance

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
    return con.execute(_SEEDS_SQL, {"checker": checker, "policy": policy}).fetchdf()


@cache
def scale_of(base_model: str) -> str:
    """The scale whose cells share a borrowed seed variance: the base model's size (``shape.params_b`` of its
    config) to the nearest power of two, e.g. ``~8B`` for 7.6B and 8.2B; a model without a config or a shape is a
    scale of its own (its name). A name from the store is matched against the config files, never opened as a path.
    """
    known = {p.stem for p in (config_dir() / "base_model").glob("*.yaml")}
    if base_model not in known:
        return base_model
    shape = load_group_option("base_model", base_model).base_model.get("shape")
    params_b = shape.get("params_b") if shape is not None else None
    if not isinstance(params_b, int | float) or params_b <= 0:
        return base_model
    return f"~{2 ** round(math.log2(params_b)):g}B"


def pooled_variances(seeds: pd.DataFrame) -> Pooled:
    """Per (method, scale, benchmark_key, metric): the between-seed variance of the cells with two or more seeds,
    pooled (``seed_variance.pooled_seed_variance``); keys without such a cell are absent."""
    cells: dict[tuple[str, str, str, str], list[list[float]]] = {}  # the seed values of each cell, per key
    keys = ["method", "base_model", "benchmark_key", "metric", "cell_group"]
    seeded = seeds[seeds.groupby(keys)["value"].transform("size") >= 2]  # one-seed cells add nothing
    for (method, base_model, key, metric, _), group in seeded.groupby(keys, sort=True):
        cells.setdefault((str(method), scale_of(str(base_model)), str(key), str(metric)), []).append(
            group["value"].astype(float).tolist()
        )
    pooled = {key: pooled_seed_variance(values) for key, values in cells.items()}
    return {key: value for key, value in pooled.items() if value is not None}


def problem_scores(con: Con, run_id: str, step: int, benchmark: str, checker: str) -> np.ndarray | None:
    """The per-problem scores of one evaluation (each problem's mean verdict over its samples, ``benchmark`` in any
    spelling), or None where the samples are not stored or the checker keeps no per-sample verdict."""
    column = SAMPLED_CHECKERS.get(checker)
    if column is None:
        return None
    rows = con.execute(
        f"""SELECT avg({column}::DOUBLE) FROM eval_samples WHERE run_id = ? AND step = ?
        AND {key_sql("benchmark")} = ? AND {column} IS NOT NULL GROUP BY problem_id ORDER BY problem_id""",
        [run_id, int(step), benchmark_key(benchmark)],
    ).fetchall()
    return np.array([r[0] for r in rows], dtype=float) if rows else None


def _normal_approximation(seeds: pd.DataFrame, confidence: float) -> Interval | None:
    """Mean over seeds; half-width: the seeds' mean problem half-width and z s / sqrt(k), in quadrature."""
    if seeds[["ci_low", "ci_high"]].isna().any(axis=None):
        return None
    values = seeds["value"].astype(float).to_numpy()
    z = NormalDist().inv_cdf(1 - (1 - confidence) / 2)
    problem_half = float(((seeds["ci_high"] - seeds["ci_low"]) / 2).mean())
    half = math.hypot(problem_half, z * float(np.std(values, ddof=1)) / math.sqrt(values.size))
    estimate = float(values.mean())
    return Interval(estimate, estimate - half, estimate + half, int(values.size), APPROXIMATE)


def cell_interval(
    con: Con,
    seeds: pd.DataFrame,
    checker: str,
    borrowed: float | None,
    samples: int = 2000,
    confidence: float = 0.95,
) -> Interval | None:
    """The interval of one cell on one benchmark and metric from its ``seed_scores`` rows (one per seed); None when
    a one-seed cell's evaluation stored no interval."""
    if len(seeds) >= 2:
        metric = str(seeds["metric"].iloc[0])
        mean_metric = metric == "pass@1" or metric.startswith("avg@")
        scores = [problem_scores(con, r.run_id, r.step, r.benchmark, checker) for r in seeds.itertuples()]
        if not mean_metric or any(s is None for s in scores):
            return _normal_approximation(seeds, confidence)
        boot = two_level_bootstrap([s for s in scores if s is not None], samples, confidence)
        # the bootstrap's spread, centred on the stored values' mean (they agree when the samples are those scored)
        estimate = float(seeds["value"].mean())
        shift = estimate - boot.estimate
        return Interval(estimate, boot.low + shift, boot.high + shift, boot.seeds, boot.source)
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
MEANINGS = {
    WITHIN: "the paper's value lies inside the cell's interval",
    OUTSIDE: "the paper's value lies outside an interval that holds seed variance (measured, or borrowed from cells "
    "of the same method and scale), or outside a base model's problem interval",
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
    return Interval(estimate, low, high, interval.seeds, interval.source)


KEY = ["method", "base_model", "dataset", "benchmark_key", "metric"]  # the columns of a PolicyKey


def seeds_by_key(seeds: pd.DataFrame, wanted: pd.DataFrame) -> dict[PolicyKey, pd.DataFrame]:
    """The ``seed_scores`` rows of each cell (method, base_model, dataset) on a benchmark key and metric, for the
    keys in ``wanted`` (a frame with the ``KEY`` columns)."""
    rows = seeds.merge(wanted[KEY].drop_duplicates(), on=KEY)
    groups = rows.groupby(KEY, sort=False)
    return {(str(m), str(b), str(d), str(k), str(t)): group for (m, b, d, k, t), group in groups}


def borrowed_for(pooled: Pooled, key: PolicyKey) -> float | None:
    """The pooled seed variance a one-seed cell of ``key`` borrows (None: no cell of its method and scale has two
    seeds on that benchmark and metric)."""
    method, base_model, _, benchmark_key, metric = key
    return pooled.get((method, scale_of(base_model), benchmark_key, metric))


def steps_text(steps: Sequence[float | int | None]) -> str:
    """The checkpoint steps of a cell's seeds: one step, or each seed's, e.g. ``40`` or ``40/38``."""
    shown = [str(int(s)) for s in steps if s is not None and not pd.isna(s)]
    return shown[0] if len(set(shown)) == 1 else "/".join(shown)
