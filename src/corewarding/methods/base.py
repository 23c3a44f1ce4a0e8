"""Plain types shared by every method core: a rollout to score and what scoring returns."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, TypeGuard

VIEWS = ("original", "rephrased", "teacher")


class Rollout(NamedTuple):
    """One sampled response. A group is the rollouts that share ``uid`` and ``view``.

    Like :class:`Scored`, a named tuple: rescoring a dump builds one per line.
    """

    uid: str
    view: str
    response: str
    ground_truth: str | None = None


class Scored(NamedTuple):
    """The reward of the rollout at ``index`` (its position in the input) and the label it was compared to.

    A named tuple, not a dataclass: 100k of them are made per rescoring pass, and a tuple is built several times faster.
    """

    index: int  # type: ignore[assignment]  # shadows tuple.index(), which no caller uses
    reward: float
    label: str | None


@dataclass(frozen=True)
class GroupLabel:
    """The label one group of rewarded rollouts was scored against, for label metrics."""

    uid: str
    view: str
    label: str | None
    ground_truth: str | None
    agreeing: int  # rollouts of the group whose answer matches the label
    size: int


@dataclass
class ScoreResult:
    """Rewards for the rewarded rollouts, in input order, plus per-group labels and counts."""

    scored: list[Scored]
    groups: list[GroupLabel] = field(default_factory=list)
    missing_ground_truth: int = 0  # rewarded rollouts whose ground truth is absent or blank (has_ground_truth)


def has_ground_truth(truth: str | None) -> TypeGuard[str]:
    """A usable ground truth: present and not blank. Every method and summary counts the others as missing.

    >>> [has_ground_truth(t) for t in ("0", "", "  ", None)]
    [True, False, False, False]
    """
    return truth is not None and bool(truth.strip())


def group_indices(rollouts: Sequence[Rollout], view: str) -> dict[str, list[int]]:
    """Indices of the rollouts of ``view``, grouped by uid, in order of first appearance."""
    return groups_by_view(rollouts).get(view, {})


def groups_by_view(rollouts: Sequence[Rollout]) -> dict[str, dict[str, list[int]]]:
    """For every view, the indices of its rollouts grouped by uid, in order of first appearance (one pass).

    >>> groups_by_view([Rollout("a", "original", ""), Rollout("a", "teacher", ""), Rollout("a", "original", "")])
    {'original': {'a': [0, 2]}, 'teacher': {'a': [1]}}
    """
    groups: dict[str, dict[str, list[int]]] = {}
    for i, r in enumerate(rollouts):
        by_uid = groups.get(r.view)
        if by_uid is None:
            by_uid = groups[r.view] = {}
        members = by_uid.get(r.uid)
        if members is None:
            by_uid[r.uid] = [i]
        else:
            members.append(i)
    return groups


TextScorer = Callable[..., ScoreResult]
