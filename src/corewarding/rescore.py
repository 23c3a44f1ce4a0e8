"""Rescore rollout dumps from JSON lines with a text-based method (``corewarding rewards score``)."""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import repeat
from operator import itemgetter
from pathlib import Path
from typing import Any

from corewarding import methods
from corewarding.files import SourceError, atomic_path, iter_json_lines, plain_json_lines, read_text
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

    NaN and ±Infinity are refused (they are not JSON and would be written back as such). A file whose lines are all
    plain JSON objects is checked column by column (C-level loops); any doubt, and the line-by-line reading below
    finds and names the first bad line, with the same checks in the same order.
    """
    text = read_text(path)
    rows = plain_json_lines(text, finite=True)
    rollouts = _checked_columns(rows, allowed_views) if rows is not None else None
    if rows is None or rollouts is None:
        return _read_line_by_line(path, text, allowed_views)
    return rollouts, rows


_FIELDS = tuple(map(itemgetter, REQUIRED_FIELDS))
_UID_VIEW = itemgetter(0, 1)  # a Rollout's (uid, view)


def _checked_columns(rows: list[dict[str, Any]], allowed_views: tuple[str, ...]) -> list[Rollout] | None:
    """The rollouts of ``rows`` if every row passes every check of :func:`_read_line_by_line`; None otherwise."""
    try:
        uids, views, responses, truths = (list(map(get, rows)) for get in _FIELDS)
        views_ok = set(views) <= set(allowed_views)
    except (KeyError, TypeError):  # a missing field; an unhashable view
        return None
    uid_types = set(map(type, uids))  # exact types: a bool uid is a bool, not an int
    if not (views_ok and uid_types in ({str}, {int}) and set(map(type, responses)) == {str}):
        return None
    if not set(map(type, truths)) <= {str, type(None)}:
        return None
    if uid_types == {int}:
        uids = list(map(str, uids))
    return list(
        map(tuple.__new__, repeat(Rollout), zip(uids, views, responses, truths, strict=True))
    )  # no call per row


def _read_line_by_line(
    path: Path, text: str, allowed_views: tuple[str, ...]
) -> tuple[list[Rollout], list[dict[str, Any]]]:
    """Parse and check line by line, raising an InputError (or SourceError) that names the first bad line."""
    rollouts: list[Rollout] = []
    rows: list[dict[str, Any]] = []
    uid_type: tuple[type, int] | None = None
    for lineno, row in iter_json_lines(path, finite=True, text=text):
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


def check_ground_truths(path: Path, rollouts: list[Rollout]) -> None:
    """One ground truth per uid: two different ones (null aside) are an InputError naming both lines. The usual file
    passes with two set comparisons; the lines are looked up only for the error."""
    pairs = {(r.uid, r.ground_truth) for r in rollouts if r.ground_truth is not None}
    if len(pairs) == len({uid for uid, _ in pairs}):
        return
    seen: dict[str, tuple[int, str]] = {}
    for lineno, row in iter_json_lines(path, finite=True):
        uid, truth = str(row["uid"]), row["ground_truth"]
        if truth is None:
            continue
        first = seen.setdefault(uid, (lineno, truth))
        if first[1] != truth:
            raise InputError(
                f"{path}:{lineno}: uid {row['uid']!r} has ground_truth {truth!r}, but line {first[0]} gives it "
                f"{first[1]!r}; one question has one answer (were two files merged?)"
            )


def check_complete_views(path: Path, rollouts: list[Rollout], views: tuple[str, ...]) -> None:
    """Every uid has rollouts of every one of ``views``: a uid lacking one is an InputError naming it, the views it
    lacks and its first line (Co-rewarding-III reads four views of each question)."""
    pairs = set(map(_UID_VIEW, rollouts))  # every (uid, view) present, in one C-level pass
    if len(pairs) == len({uid for uid, _ in pairs}) * len(views):  # views were checked on reading: all present
        return
    present: dict[str, set[str]] = {view: set() for view in views}
    for uid, view in pairs:
        present[view].add(uid)
    for uid in dict.fromkeys(r.uid for r in rollouts):
        lacking = [view for view in views if uid not in present[view]]
        if lacking:
            line = next(n for n, row in iter_json_lines(path, finite=True) if str(row["uid"]) == uid)
            raise InputError(
                f"{path}:{line}: uid {uid!r} has no rollouts of view(s) {', '.join(lacking)}; this method needs "
                f"all of {', '.join(views)} for every uid"
            )


def write_jsonl_atomic(path: Path, rows: list[dict[str, Any]]) -> None:
    """Write all rows or nothing (a temporary file renamed into place); NaN/Infinity are never written."""
    encode = json.JSONEncoder(ensure_ascii=False, allow_nan=False).encode  # one encoder, not one per json.dumps
    with atomic_path(path) as tmp, tmp.open("w", encoding="utf-8") as out:
        if rows:  # one join and one write, not one per row
            out.write("\n".join(map(encode, rows)))
            out.write("\n")


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector over a bulk pass that makes no reference cycles.

    A rescoring pass keeps one Rollout (a tuple subclass, which the collector tracks for good) per row until it ends;
    with the collector on, 100k of them set off full collections that walk them all and find nothing (a tenth of a
    100k-row rescore, perf/cli_perf.py). What the pass makes is freed by reference counting when it returns.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def score_file(method: str, input_path: Path, output_path: Path, voter: Voter | None = None) -> dict[str, Any]:
    """Score ``input_path`` with ``method`` and write the rewarded rows with ``reward`` and ``label``."""
    spec = methods.get(method)
    if spec.kind != "text" or spec.score is None:
        raise InputError(f"method {method!r} rewards from logits, not from text; it cannot rescore a dump")
    with _collector_paused():
        rollouts, rows = read_rollouts(input_path, spec.views)
        check_ground_truths(input_path, rollouts)
        if spec.complete_views:
            check_complete_views(input_path, rollouts, spec.views)
        result = spec.score(rollouts, voter or Voter())
        columns = zip(result.indices, result.rewards, result.labels, strict=True)
        out = [{**rows[i], "reward": reward, "label": label} for i, reward, label in columns]
        write_jsonl_atomic(output_path, out)
        del rollouts, rows, out  # freed here, by reference counting, before the collector runs again
    summary: dict[str, Any] = summarize(result)
    counts = voter.checker_counts() if voter else {}
    if counts:  # pathological answers are counted as not equal and reported here
        summary["math_verify_timeouts"] = counts.get("timeout", 0)
        summary["math_verify_errors"] = counts.get("error", 0)
    return summary
