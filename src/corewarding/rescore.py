"""Rescore rollout dumps from JSON lines with a text-based method (``corewarding rewards score``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from corewarding import methods
from corewarding.data.io import SourceError, atomic_path, iter_json_lines
from corewarding.methods.base import Rollout
from corewarding.methods.summary import summarize
from corewarding.methods.voting import Voter

REQUIRED_FIELDS = ("uid", "view", "response", "ground_truth")


class InputError(SourceError):
    """A rollout file that cannot be scored; the message names the file and line."""


def _check_uid(uid: Any, where: str, first: tuple[type, int] | None, lineno: int) -> tuple[type, int]:
    """The uid type of the file so far; a uid that is not a string or integer, or of another type, is an error."""
    if isinstance(uid, bool) or not isinstance(uid, str | int):
        raise InputError(f"{where}: uid must be a string or an integer, got {type(uid).__name__}")
    if first is None:
        return type(uid), lineno
    if type(uid) is not first[0]:
        raise InputError(
            f"{where}: uid {uid!r} is a {type(uid).__name__} but line {first[1]} has a {first[0].__name__} uid; "
            'one file holds one uid type (1 and "1" would be merged into one group)'
        )
    return first


def read_rollouts(path: Path, allowed_views: tuple[str, ...]) -> tuple[list[Rollout], list[dict[str, Any]]]:
    """Parse and validate every line; the first bad line raises a SourceError naming it.

    NaN and ±Infinity are refused (they are not JSON and would be written back as such).
    """
    rollouts: list[Rollout] = []
    rows: list[dict[str, Any]] = []
    uid_type: tuple[type, int] | None = None
    for lineno, row in iter_json_lines(path, finite=True):
        try:  # the common case first: every check below is one comparison (100k rows rescore in seconds)
            uid, view, response, truth = row["uid"], row["view"], row["response"], row["ground_truth"]
        except KeyError:
            missing = [f for f in REQUIRED_FIELDS if f not in row]
            raise InputError(f"{path}:{lineno}: missing field(s) {', '.join(missing)}") from None
        if view not in allowed_views:
            raise InputError(f"{path}:{lineno}: view {view!r} is not used by this method (uses {allowed_views})")
        if type(response) is not str:
            raise InputError(f"{path}:{lineno}: response must be a string")
        if truth is not None and type(truth) is not str:
            raise InputError(f"{path}:{lineno}: ground_truth must be a string or null")
        if uid_type is None or type(uid) is not uid_type[0]:
            uid_type = _check_uid(uid, f"{path}:{lineno}", uid_type, lineno)
        rollouts.append(Rollout(str(uid), view, response, truth))
        rows.append(row)
    return rollouts, rows


def write_jsonl_atomic(path: Path, rows: list[dict[str, Any]]) -> None:
    """Write all rows or nothing (a temporary file renamed into place); NaN/Infinity are never written."""
    encode = json.JSONEncoder(ensure_ascii=False, allow_nan=False).encode  # one encoder, not one per json.dumps
    with atomic_path(path) as tmp, tmp.open("w", encoding="utf-8") as out:
        for row in rows:
            out.write(encode(row) + "\n")


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
