"""One canonical spelling per benchmark, and the key that matches every spelling of it.

The store keeps a benchmark under one name, the paper's (``MATH500``, ``GSM8K``, ``AMC``, ``LCB``, ``CRUX``,
``IFEval``, ``MMLU-Pro``: the reference CSV's columns): ``benchmark_name`` turns any spelling (the evaluator's config
name ``math500``, ``Math-500``, ``livecodebench_v6``) into it on the way in, wherever a row is inserted (evaluation
files of reproduced and released runs, synthetic ones included, and the paper's numbers). Readers never compare the
stored spelling itself: they compare ``benchmark_key`` (Python) or ``key_sql`` (its SQL twin), so a store written
before names were canonical, or a row inserted by hand, still matches; ``name_sql`` shows such a row under its
canonical name. A name this table does not know is kept as given and matched by its key (case and punctuation
ignored).
"""

from __future__ import annotations

import re

# The canonical spellings: the paper's tables, then the other benchmarks configs/benchmark/ ships (the v3 paper's
# AIME, and the project's own sets under their config names).
PAPER_BENCHMARKS = ("MATH500", "GSM8K", "AMC", "LCB", "CRUX", "IFEval", "MMLU-Pro")
OTHER_BENCHMARKS = ("AIME24", "AIME25", "Minerva Math", "OlympiadBench", "math_test", "tiny")
# Spellings whose key differs from their benchmark's: the config name the evaluator writes for the paper's LCB column
# (configs/eval.yaml's `paper` suite is the paper's Table 5)
ALIASES = {"livecodebench_v6": "LCB"}


def name_key(name: str) -> str:
    """A name without case or punctuation, so ``MMLU-Pro`` and ``mmlu_pro`` meet (also for model and data set names).

    >>> name_key("MMLU-Pro"), name_key("Qwen3-8B-Base")
    ('mmlupro', 'qwen38bbase')
    """
    return re.sub(r"[^a-z0-9]", "", name.lower())


CANONICAL = {name_key(n): n for n in (*PAPER_BENCHMARKS, *OTHER_BENCHMARKS)}
CANONICAL.update({name_key(alias): target for alias, target in ALIASES.items()})


def benchmark_name(name: str) -> str:
    """The canonical spelling of a benchmark; a name the table does not know, as given.

    >>> benchmark_name("math500"), benchmark_name("Math-500"), benchmark_name("livecodebench_v6")
    ('MATH500', 'MATH500', 'LCB')
    >>> benchmark_name("my_bench")
    'my_bench'
    """
    return CANONICAL.get(name_key(name), name)


def benchmark_key(name: str) -> str:
    """What readers match a benchmark by: the key of its canonical name (``math500`` for every MATH500 spelling).

    >>> benchmark_key("MATH-500"), benchmark_key("livecodebench_v6"), benchmark_key("My-Bench")
    ('math500', 'lcb', 'mybench')
    """
    return name_key(benchmark_name(name))


def _raw_key_sql(column: str) -> str:
    return f"regexp_replace(lower({column}), '[^a-z0-9]', '', 'g')"


def key_sql(column: str) -> str:
    """``benchmark_key`` in SQL, of a column (a trusted column name, never user input): readers match
    ``key_sql(col) = ?`` with ``benchmark_key(name)`` bound, or two columns' keys with each other."""
    sql = _raw_key_sql(column)
    targets: dict[str, list[str]] = {}  # an alias's key -> the keys of its spellings
    for alias, target in sorted(ALIASES.items()):
        targets.setdefault(name_key(target), []).append(name_key(alias))
    for target, keys in targets.items():  # a nested replace computes the key once per row (a CASE would twice)
        sql = f"regexp_replace({sql}, '^({'|'.join(keys)})$', '{target}')"
    return sql


def name_sql(column: str) -> str:
    """``benchmark_name`` in SQL, of a column (a trusted column name): the canonical spelling to show and group by,
    for rows stored before names were canonical. Apply it after aggregating where a table is large."""
    whens = " ".join(f"WHEN '{k}' THEN '{n}'" for k, n in sorted(CANONICAL.items()))
    return f"(CASE {_raw_key_sql(column)} {whens} ELSE {column} END)"
