"""Plain types shared by every method core: a rollout to score and what scoring returns."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from typing import NamedTuple, TypeGuard

VIEWS = ("original", "rephrased", "teacher")
VIEW_TAGS = {"original": "ori", "rephrased": "aug"}  # suffixes of per-view metrics (the reference's names)
PER_VIEW_LOSS_METRICS = ("pg_loss", "kl_mean", "clipfrac", "ppo_kl")  # logged as {name}_{ori,aug} for two views


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


class GroupLabel(NamedTuple):
    """The label one group of rewarded rollouts was scored against, for label metrics.

    A named tuple: its fields are plain values, so the garbage collector stops tracking it at its first pass. As a
    dataclass (an object and a dict each), the 12,500 groups of a 100k-row dump set off full collections of the heap.
    """

    uid: str
    view: str
    label: str | None
    ground_truth: str | None
    agreeing: int  # rollouts of the group whose answer matches the label
    size: int


@dataclass
class ScoreResult:
    """Rewards for the rewarded rollouts, in input order, plus per-group labels and counts.

    Three parallel columns (rollout index, reward, label), not a Scored per row: plain lists of plain values are
    built faster and the garbage collector never walks them, while 100k tuple subclasses (which it tracks for good)
    set off full collections. :attr:`scored` gives the rows as Scored tuples.

    >>> result = ScoreResult.from_scored([Scored(0, 1.0, "2"), Scored(2, 0.0, None)])
    >>> result.rewards, result.scored
    ([1.0, 0.0], [Scored(index=0, reward=1.0, label='2'), Scored(index=2, reward=0.0, label=None)])
    """

    indices: list[int]
    rewards: list[float]
    labels: list[str | None]
    groups: list[GroupLabel] = field(default_factory=list)
    missing_ground_truth: int = 0  # rewarded rollouts whose ground truth is absent or blank (has_ground_truth)

    @classmethod
    def from_scored(cls, scored: list[Scored], groups: list[GroupLabel] | None = None, missing: int = 0) -> ScoreResult:
        """A result from Scored rows in input order."""
        indices = [s.index for s in scored]
        rewards = [s.reward for s in scored]
        return cls(indices, rewards, [s.label for s in scored], groups or [], missing)

    @property
    def scored(self) -> list[Scored]:
        """The rows as Scored(index, reward, label), built on each call."""
        rows = zip(self.indices, self.rewards, self.labels, strict=True)
        return list(map(tuple.__new__, repeat(Scored), rows))  # Scored(i, reward, label) without a Python call


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
    for i, (uid, view, _, _) in enumerate(rollouts):  # unpacking a tuple is cheaper than two attribute reads
        by_uid = groups.get(view)
        if by_uid is None:
            by_uid = groups[view] = {}
        members = by_uid.get(uid)
        if members is None:
            by_uid[uid] = [i]
        else:
            members.append(i)
    return groups


TextScorer = Callable[..., ScoreResult]
