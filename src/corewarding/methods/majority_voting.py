"""Majority-Voting (TTRL/SRT style): the label is the majority answer of the same policy rollouts being trained."""

from __future__ import annotations

from collections.abc import Sequence

from corewarding.methods.base import Rollout, ScoreResult
from corewarding.methods.cross_vote import score_by_vote
from corewarding.methods.registry import MethodSpec, register
from corewarding.methods.voting import Voter


def score(rollouts: Sequence[Rollout], voter: Voter | None = None) -> ScoreResult:
    """r_i = 1[a(y_i) = majority{a(y_j)} of the group, the majority non-empty].

    >>> rows = [Rollout("u", "original", f"\\\\boxed{{{a}}}") for a in ["2", "3", "2", ""]]
    >>> [(s.reward, s.label) for s in score(rows).scored]
    [(1.0, '2'), (0.0, '2'), (1.0, '2'), (0.0, '2')]
    """
    return score_by_vote(rollouts, voter or Voter(), [("original", "original")])


SPEC = register(
    MethodSpec(name="majority_voting", kind="text", views=("original",), rewarded_views=("original",), score=score)
)
