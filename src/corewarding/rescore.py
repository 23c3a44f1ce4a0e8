"""Rescore rollout dumps from JSON lines with a text-based method (``corewarding rewards score``)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from corewarding import methods
from corewarding.methods.base import Rollout
from corewarding.methods.summary import summarize
from corewarding.methods.voting import Voter

REQUIRED_FIELDS = ("uid", "view", "response", "ground_truth")


class InputError(ValueError):
    """A rollout file that cannot be scored; the message names the file and line."""


def read_rollouts(path: Path, allowed_views: tuple[str, ...]) -> tuple[list[Rollout], list[dict[str, Any]]]:
    """Parse and validate every line; the first bad line raises an InputError naming it."""
    rollouts: list[Rollout] = []
    rows: list[dict[str, Any]] = []
    try:
        # split on "\n" only: JSON strings may hold U+2028/U+2029/U+0085, which str.splitlines() breaks on
        lines = [line.rstrip("\r") for line in path.read_text(encoding="utf-8").split("\n")]
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read: {exc}") from exc
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"{where}: not JSON ({exc.msg})") from exc
        if not isinstance(row, dict):
            raise InputError(f"{where}: expected a JSON object, got {type(row).__name__}")
        missing = [f for f in REQUIRED_FIELDS if f not in row]
        if missing:
            raise InputError(f"{where}: missing field(s) {', '.join(missing)}")
        if row["view"] not in allowed_views:
            raise InputError(f"{where}: view {row['view']!r} is not used by this method (uses {allowed_views})")
        if not isinstance(row["response"], str):
            raise InputError(f"{where}: response must be a string")
        truth = row["ground_truth"]
        if truth is not None and not isinstance(truth, str):
            raise InputError(f"{where}: ground_truth must be a string or null")
        rollouts.append(Rollout(str(row["uid"]), row["view"], row["response"], truth))
        rows.append(row)
    return rollouts, rows


def write_jsonl_atomic(path: Path, rows: list[dict[str, Any]]) -> None:
    """Write all rows or nothing: a temporary file beside ``path``, renamed into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            for row in rows:
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def score_file(method: str, input_path: Path, output_path: Path, voter: Voter | None = None) -> dict[str, Any]:
    """Score ``input_path`` with ``method`` and write the rewarded rows with ``reward`` and ``label``."""
    spec = methods.get(method)
    if spec.kind != "text" or spec.score is None:
        raise InputError(f"method {method!r} rewards from logits, not from text; it cannot rescore a dump")
    rollouts, rows = read_rollouts(input_path, spec.views)
    result = spec.score(rollouts, voter or Voter())
    out = [{**rows[s.index], "reward": s.reward, "label": s.label} for s in result.scored]
    write_jsonl_atomic(output_path, out)
    summary: dict[str, Any] = summarize(result)
    counts = voter.checker_counts() if voter else {}
    if counts:  # pathological answers are counted as not equal and reported here
        summary["math_verify_timeouts"] = counts.get("timeout", 0)
        summary["math_verify_errors"] = counts.get("error", 0)
    return summary
