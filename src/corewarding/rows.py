"""The verl row format shared by every data set (methods.md section 3): its columns, building and reading rows, and
reading a field of any nested record by its dotted path (source records, prepared rows, configs)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from corewarding.files import SourceError

SYSTEM_PROMPT = "Let's think step by step and output the final answer within \\boxed{}."
DATA_SOURCE = "DigitalLearningGmbH/MATH-lighteval"


def make_row(question: str, ground_truth: str | None, index: int, split: str, **extra_info: Any) -> dict:
    """Build one verl row: system instruction first, the question as the user message."""
    # Keys in sorted order, as in the reference parquet files (their struct fields are sorted).
    info = {"index": index, "split": split, **extra_info}
    return {
        "data_source": DATA_SOURCE,
        "prompt": [
            {"content": SYSTEM_PROMPT, "role": "system"},
            {"content": question, "role": "user"},
        ],
        "ability": "math",
        "reward_model": {"ground_truth": ground_truth, "style": "rule"},
        "extra_info": dict(sorted(info.items())),
    }


def get_path(record: Mapping[str, Any], path: str) -> Any:
    """``record["a"]["b"]`` for ``"a.b"``; None when a part is missing (a record without the field).

    >>> get_path({"extra_info": {"id": 7}}, "extra_info.id"), get_path({"extra_info": {}}, "extra_info.id")
    (7, None)
    """
    value: Any = record
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def question_of(row: dict) -> str:
    """Return the user message (the question) of a verl row."""
    for message in row["prompt"]:
        if message["role"] == "user":
            return str(message["content"])
    raise KeyError("row has no user message")


def ground_truth_of(row: dict) -> str | None:
    """Return the ground-truth answer of a verl row (None when missing)."""
    gt = row["reward_model"]["ground_truth"]
    return None if gt is None else str(gt)


VERL_COLUMNS = ("prompt", "reward_model")


def read_verl_rows(path: Path) -> list[dict[str, Any]]:
    """Read a verl-format parquet as plain rows; a missing file or column is an error naming it."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file (prepare the data first: corewarding data prepare)")
    import pyarrow.parquet as pq  # pyarrow: imported when used

    try:
        table = pq.read_table(path)
    except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        raise SourceError(f"{path}: cannot read parquet ({exc})") from exc
    missing = [c for c in VERL_COLUMNS if c not in table.column_names]
    if missing:
        raise SourceError(f"{path}: missing column(s) {', '.join(missing)}")
    rows: list[dict[str, Any]] = table.to_pylist()
    return rows
