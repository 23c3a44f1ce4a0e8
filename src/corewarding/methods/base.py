"""Plain types shared by every method core: a rollout to score and what scoring returns."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeGuard

VIEWS = ("original", "rephrased", "teacher")


@dataclass(frozen=True)
class Rollout:
    """One sampled response. A group is the rollouts that share ``uid`` and ``view``."""

    uid: str
    view: str
    response: str
    ground_truth: str | None = None


@dataclass(frozen=True)
class Scored:
    """The reward of the rollout at ``index`` (its position in the input) and the label it was compared to."""

    index: int
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
    groups: dict[str, list[int]] = {}
    for i, r in enumerate(rollouts):
        if r.view == view:
            groups.setdefault(r.uid, []).append(i)
    return groups


TextScorer = Callable[..., ScoreResult]
