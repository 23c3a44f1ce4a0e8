"""The evaluation files' rows, spelled once: the checkers, and the columns of ``metrics.parquet`` and
``samples.parquet`` (name, SQL type, Arrow type, required, stored).

The writer (``evaluation/outputs.py``) builds its Arrow schemas from these tables and the reader
(``results/ingest/evaluation.py``) its casts and checks, so a column added here is written and read alike. The
generations file of a unit (``evaluation/units.py``) is a few of the samples' columns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass(frozen=True)
class Checker:
    """A checker that scores a metric row: ``per_sample`` ones also give each sample row a verdict
    (``correct_<name>``) and its version (``checker_version_<name>``); ``preference`` orders the ones a report
    shows first (1 before 2; None: never preferred)."""

    name: str
    per_sample: bool
    preference: int | None = None


# strict / math_verify: the math harness; the others: the external benchmarks' own tools (IFEval, MMLU-Pro, code)
CHECKER_TABLE = (
    Checker("strict", per_sample=True, preference=2),
    Checker("math_verify", per_sample=True, preference=1),
    Checker("lm_eval", per_sample=False),
    Checker("livecodebench", per_sample=False),
    Checker("zeroeval", per_sample=False),
)
METRIC_CHECKERS = tuple(c.name for c in CHECKER_TABLE)  # what a metric row's checker may be
SAMPLE_CHECKERS = tuple(c.name for c in CHECKER_TABLE if c.per_sample)  # the math harness's, in this order
_RANKED = [c for c in CHECKER_TABLE if c.preference is not None]
PREFERRED_CHECKERS = tuple(c.name for c in sorted(_RANKED, key=lambda c: c.preference or 0))  # math_verify, strict


def verdict_column(checker: str) -> str:
    """The sample column of a per-sample checker's verdict.

    >>> verdict_column("math_verify")
    'correct_math_verify'
    """
    return f"correct_{checker}"


def version_column(checker: str) -> str:
    """The sample column of the version of the code that gave a per-sample checker's verdict."""
    return f"checker_version_{checker}"


ARROW_OF_SQL = {"INTEGER": "int32", "BIGINT": "int64", "DOUBLE": "float64", "VARCHAR": "string", "BOOLEAN": "bool_"}


@dataclass(frozen=True)
class Column:
    """One column: its DuckDB type (the store's), whether the reader refuses a file without it, whether the store
    keeps it (a column only the run folder's readers use is written but not stored)."""

    name: str
    sql: str
    required: bool = False
    stored: bool = True

    @property
    def arrow(self) -> str:
        """The name of its pyarrow type factory (``pa.int32``...)."""
        return ARROW_OF_SQL[self.sql]


METRIC_TABLE = (
    Column("step", "INTEGER", required=True),  # null: the base model
    Column("benchmark", "VARCHAR", required=True),
    Column("checker", "VARCHAR", required=True),  # one of METRIC_CHECKERS
    Column("metric", "VARCHAR", required=True),  # pass@1, avg@8, pass@8, maj@8 ...
    Column("value", "DOUBLE", required=True),
    Column("ci_low", "DOUBLE"),
    Column("ci_high", "DOUBLE"),
    Column("n", "INTEGER", required=True),  # samples per problem
    Column("num_problems", "INTEGER"),
    Column("temperature", "DOUBLE"),
    Column("seed", "BIGINT"),
    Column("model_revision", "VARCHAR"),
    Column("model", "VARCHAR", stored=False),  # where the weights were loaded from (a local path)
    Column("settings", "VARCHAR"),  # JSON (evaluation/provenance.py)
    Column("settings_key", "VARCHAR"),
)
SAMPLE_TABLE = (
    Column("step", "INTEGER", required=True),
    Column("benchmark", "VARCHAR", required=True),
    Column("problem_id", "VARCHAR", required=True),
    Column("sample_index", "INTEGER", required=True),
    Column("question", "VARCHAR"),  # the prompt's last user message
    Column("response", "VARCHAR", required=True),
    Column("extracted_answer", "VARCHAR"),
    Column("gold", "VARCHAR"),  # the reference answer
    *(Column(verdict_column(c), "BOOLEAN") for c in SAMPLE_CHECKERS),
    Column("length", "INTEGER"),  # tokens
    Column("truncated", "BOOLEAN"),  # finish_reason == "length"
    Column("finish_reason", "VARCHAR"),  # the generator's: stop, length ...
    Column("settings_key", "VARCHAR"),  # the unit's settings (checker aside): an audit keeps one set per protocol
    *(Column(version_column(c), "VARCHAR") for c in SAMPLE_CHECKERS),  # provenance.checker_version
)
GENERATION_COLUMNS = ("problem_id", "sample_index", "response", "length", "finish_reason")  # a unit's generations


def columns(table: Sequence[Column], names: Sequence[str]) -> tuple[Column, ...]:
    """The columns of ``table`` called ``names``, in that order."""
    by_name = {c.name: c for c in table}
    return tuple(by_name[name] for name in names)


def stored(table: Sequence[Column]) -> tuple[Column, ...]:
    """The columns the store keeps, in the table's order."""
    return tuple(c for c in table if c.stored)


def arrow_schema(table: Sequence[Column]) -> pa.Schema:
    """The Arrow schema of these columns (what the writer writes)."""
    import pyarrow as pa  # pyarrow: imported when used

    return pa.schema([(c.name, getattr(pa, c.arrow)()) for c in table])
