"""The run table's chosen columns, sort and filters (W&B-style), as plain values: no Streamlit here.

A column is named in the URL by a key (``col=``, ``sort=``, ``filter=``): a fixed column by its name (``last_val_acc``),
a store column by its kind and parts, ``:``-separated, each part with ``%`` and ``:`` percent-escaped:

- ``train:<metric>:last`` (the value at the highest step that logged it) and ``train:<metric>:best`` (the highest,
  for a metric where higher is better: accuracies, rewards, pass@k, scores);
- ``eval:<benchmark>:<metric>:newest`` (the newest evaluated checkpoint) and ``eval:<benchmark>:<metric>:best`` (the
  checkpoint scoring highest), under the page's checker;
- ``config:<dotted key>`` (a leaf of the run's resolved config; a list as its JSON text).

Every key is allow-listed against what the store holds; a filter is ``<key> <op> <value>``, e.g.
``eval:MATH500:pass@1:newest >= 0.5`` or ``config:method.name contains co_rew``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import pandas as pd

from corewarding.results.names import benchmark_key, benchmark_name

NUMBER_OPS = (">=", "<=", "!=", ">", "<", "=")  # longest first: ">=" is not read as ">" and "= ..."
TEXT_OPS = ("contains", "=", "!=")
EMPTY_OPS = ("is not empty", "is empty")
OPS = tuple(dict.fromkeys(sorted((*NUMBER_OPS, *TEXT_OPS, *EMPTY_OPS), key=len, reverse=True)))
BETTER_HIGH = re.compile(r"acc|reward|pass@|score", re.IGNORECASE)  # metrics with a meaningful "best" (the highest)


@dataclass(frozen=True)
class Column:
    """One column the table can show: its URL key, header, help and what it reads (``kind``: builtin, train, eval,
    config; ``name``: the metric, benchmark or config key; ``metric``: an evaluation's metric; ``at``: last, best or
    newest)."""

    key: str
    label: str
    help: str = ""
    kind: str = "builtin"
    name: str = ""
    metric: str = ""
    at: str = ""


@dataclass(frozen=True)
class Filter:
    """``key op value``: a number compared (``>=``, ``=``, ...), a text matched (``contains``, ``=``, ``!=``, any
    case for ``contains``), or ``is empty`` / ``is not empty`` (no value)."""

    key: str
    op: str
    value: str = ""

    def text(self) -> str:
        """The filter as the URL keeps it."""
        return f"{self.key} {self.op}" if self.op in EMPTY_OPS else f"{self.key} {self.op} {self.value}"


@dataclass(frozen=True)
class Choice:
    """What the table shows: its optional columns (keys, in order), the sort column and direction, the filters."""

    columns: tuple[str, ...]
    sort: str | None = None
    descending: bool = True
    filters: tuple[Filter, ...] = field(default_factory=tuple)


def _escape(part: str) -> str:
    return part.replace("%", "%25").replace(":", "%3A")


def _unescape(part: str) -> str:
    return part.replace("%3A", ":").replace("%3a", ":").replace("%25", "%")


def column_key(kind: str, *parts: str) -> str:
    """A store column's URL key (one key per column: the parts are escaped).

    >>> column_key("eval", "MATH500", "pass@1", "newest"), column_key("config", "a:b")
    ('eval:MATH500:pass@1:newest', 'config:a%3Ab')
    """
    return ":".join([kind, *(_escape(p) for p in parts)])


def canonical_key(key: str) -> str:
    """``key`` with an evaluation's benchmark in its canonical spelling, so ``eval:math500:...`` names MATH500's."""
    kind, _, rest = key.partition(":")
    parts = rest.split(":")
    if kind != "eval" or len(parts) != 3:
        return key
    return column_key("eval", benchmark_name(_unescape(parts[0])), *(_unescape(p) for p in parts[1:]))


def store_columns(metrics: Iterable[str], evaluations: pd.DataFrame, config_keys: Iterable[str]) -> dict[str, Column]:
    """Every store column the table can add, by key: each training metric's last value (and its best where higher is
    better), each evaluated (benchmark, metric)'s value at the newest and at the best checkpoint, each config key.
    Headers are made unique (a clash gets its key)."""
    found: list[Column] = []
    for metric in metrics:
        last = "training metric: its value at the last step that logged it"
        found.append(Column(column_key("train", metric, "last"), f"{metric} (last)", last, "train", metric, at="last"))
        if BETTER_HIGH.search(metric):
            found.append(Column(column_key("train", metric, "best"), f"{metric} (best)",
                                "training metric: its highest value", "train", metric, at="best"))  # fmt: skip
    for bench, metric in evaluations[["benchmark", "metric"]].itertuples(index=False):
        for at, word, where in (("newest", "newest ckpt", "the newest evaluated"), ("best", "best ckpt", "the best")):
            help_ = f"evaluation under the page's checker, at {where} checkpoint"
            found.append(Column(column_key("eval", bench, metric, at), f"{bench} {metric} ({word})", help_, "eval",
                                bench, metric, at))  # fmt: skip
    for key in config_keys:
        found.append(Column(column_key("config", key), f"config.{key}", "the run's resolved config", "config", key))
    counts = pd.Series([c.label for c in found]).value_counts()
    return {c.key: replace(c, label=f"{c.label} [{c.key}]") if counts.get(c.label, 0) > 1 else c for c in found}


def column_values(
    columns: Sequence[Column], train: pd.DataFrame, evals: pd.DataFrame, config: pd.DataFrame
) -> pd.DataFrame:
    """The store columns' values, one row per run (index ``run_id``), one column per key: from ``train``
    (``queries.training_summaries``), ``evals`` (``queries.eval_summaries``) and ``config`` (``queries.run_configs``).
    A config key is a number column where every run's value is a number, else text."""
    out: dict[str, pd.Series] = {}
    for c in columns:
        if c.kind == "train":
            rows = train[train["metric"] == c.name]
            out[c.key] = rows.set_index("run_id")["best" if c.at == "best" else "last"]
        elif c.kind == "eval":
            rows = evals[(evals["benchmark_key"] == benchmark_key(c.name)) & (evals["metric"] == c.metric)]
            out[c.key] = rows.set_index("run_id")[c.at]
        elif c.kind == "config":
            rows = config[config["key"] == c.name].set_index("run_id")
            numeric = rows["number"].notna().all()
            out[c.key] = rows["number"].astype(float) if numeric else rows["text"]
    frame = pd.DataFrame(out)
    frame.index.name = "run_id"
    return frame


def from_url(
    params: Mapping[str, str | Sequence[str]],
    allowed: Mapping[str, Column],
    defaults: Sequence[str],
    fixed: Sequence[str] = (),
) -> tuple[Choice, list[str]]:
    """The choice a URL gives (``col``, repeated; ``sort``; ``order``: asc or desc; ``filter``, repeated), each key
    allow-listed, and what was dropped (``column X``, ``sort X``, ``filter X``: not in this store or not understood).
    No ``col`` gives ``defaults``; an empty ``col=`` none. A sort or filter column not listed is added to the
    columns; a ``fixed`` one (always shown) is never listed."""
    params = {name: [value] if isinstance(value, str) else list(value) for name, value in params.items()}
    dropped: list[str] = []
    columns: list[str] = list(defaults)
    if "col" in params:
        columns = []
        for asked in (v for v in params["col"] if v):
            key = allowed_key(asked, allowed)
            if key is None:
                dropped.append(f"column {asked}")
            elif key not in columns and key not in fixed:
                columns.append(key)
    sort = None
    for asked in [v for v in params.get("sort", []) if v][:1]:
        sort = allowed_key(asked, allowed)
        if sort is None:
            dropped.append(f"sort {asked}")
    order = [v for v in params.get("order", []) if v]
    if order and order[0] not in ("asc", "desc"):
        dropped.append(f"order {order[0]}")
    filters: list[Filter] = []
    for text in (v for v in params.get("filter", []) if v):
        parsed = parse_filter(text, allowed)
        if parsed is None:
            dropped.append(f"filter {text}")
        elif parsed not in filters:
            filters.append(parsed)
    for key in [sort, *(f.key for f in filters)]:
        if key is not None and key not in columns and key not in fixed:
            columns.append(key)
    descending = not order or order[0] != "asc"
    return Choice(tuple(columns), sort, descending, tuple(filters)), dropped


def allowed_key(key: str, allowed: Mapping[str, Column]) -> str | None:
    """``key`` as the allow-list spells it (an evaluation's benchmark in any spelling), None when it is not there."""
    if key in allowed:
        return key
    return canonical_key(key) if canonical_key(key) in allowed else None


def parse_filter(text: str, allowed: Mapping[str, Column]) -> Filter | None:
    """``<key> <op> [value]`` read against the allowed keys (a key may hold spaces: the longest that fits first);
    None when no allowed key and operator fit, or an operator that needs a value has none."""
    for cut in sorted((i for i, ch in enumerate(text) if ch == " "), reverse=True):
        key, rest = allowed_key(text[:cut], allowed), text[cut + 1 :]
        if key is None:
            continue
        for op in OPS:
            if op in EMPTY_OPS and rest == op:
                return Filter(key, op)
            if op not in EMPTY_OPS and rest.startswith(op + " ") and rest[len(op) + 1 :].strip():
                return Filter(key, op, rest[len(op) + 1 :])
    return None


def filter_problem(f: Filter, values: pd.Series) -> str | None:
    """Why ``f`` cannot apply to a column holding ``values`` (None when it can): a comparison needs a number column
    and a number; ``contains`` a text column."""
    numeric = pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values)
    if f.op in EMPTY_OPS:
        return None
    if numeric:
        if f.op not in NUMBER_OPS:
            return f"{f.op} needs a text column"
        try:
            number = float(f.value)
        except ValueError:
            return f"{f.value} is not a number"
        return None if math.isfinite(number) else f"{f.value} is not a finite number"
    return None if f.op in TEXT_OPS else f"{f.op} needs a number column"


def _as_text(values: pd.Series) -> pd.Series:
    return values.map(lambda v: None if v is None or (isinstance(v, float) and math.isnan(v)) else str(v))


def matching(frame: pd.DataFrame, filters: Sequence[Filter]) -> pd.Series:
    """Rows meeting every filter (each checked with ``filter_problem`` first). A comparison holds only for rows
    with a value; ``is empty`` finds the rest."""
    keep = pd.Series(True, index=frame.index)
    for f in filters:
        values = frame[f.key]
        empty = values.isna() | (_as_text(values) == "")
        if f.op in EMPTY_OPS:
            keep &= empty if f.op == "is empty" else ~empty
        elif f.op in NUMBER_OPS and pd.api.types.is_numeric_dtype(values):
            number, x = float(f.value), values.astype(float)
            compared = {">=": x >= number, "<=": x <= number, ">": x > number, "<": x < number,
                        "=": x == number, "!=": x != number}[f.op]  # fmt: skip
            keep &= compared.fillna(False).astype(bool) & ~empty
        else:
            text = _as_text(values).fillna("")
            if f.op == "contains":
                keep &= ~empty & text.str.lower().str.contains(f.value.lower(), regex=False)
            else:
                keep &= ~empty & ((text == f.value) if f.op == "=" else (text != f.value))
    return keep


def sorted_rows(frame: pd.DataFrame, key: str | None, descending: bool) -> pd.DataFrame:
    """``frame`` sorted by the column ``key`` (missing values last either way; ties keep their order), or as it is."""
    if key is None:
        return frame.reset_index(drop=True)
    return frame.sort_values(key, ascending=not descending, na_position="last", kind="stable").reset_index(drop=True)


def url_params(choice: Choice, defaults: Sequence[str]) -> dict[str, str | list[str]]:
    """The URL parameters that give ``choice`` back (``from_url``): ``col`` only where it differs from ``defaults``
    (``col=`` for none), ``sort`` with ``order``, ``filter``."""
    out: dict[str, str | list[str]] = {}
    if list(choice.columns) != list(defaults):
        out["col"] = list(choice.columns) or ""
    if choice.sort:
        out["sort"] = choice.sort
        out["order"] = "desc" if choice.descending else "asc"
    if choice.filters:
        out["filter"] = [f.text() for f in choice.filters]
    return out
