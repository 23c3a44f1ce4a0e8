"""Co-rewarding-I (data side): each view of a question is rewarded with the other view's majority answer.

The original question's rollouts are scored against the vote of the rephrased question's rollouts, and vice versa
(paper Eq. 7-8; the reference ``CoRewardManager``). Both views share one uid; advantages stay within each view.
"""

from __future__ import annotations

from collections.abc import Sequence

from corewarding.methods.base import Rollout, ScoreResult
from corewarding.methods.cross_vote import score_by_vote
from corewarding.methods.registry import MethodSpec, register
from corewarding.methods.voting import Voter


def score(rollouts: Sequence[Rollout], voter: Voter | None = None) -> ScoreResult:
    """r(y_i) = 1[a(y_i) = vote(rephrased)], r(y'_i) = 1[a(y'_i) = vote(original)].

    >>> box = lambda a: f"\\\\boxed{{{a}}}"
    >>> rows = [Rollout("u", "original", box(a)) for a in ["5", "5", "6"]]
    >>> rows += [Rollout("u", "rephrased", box(a)) for a in ["6", "6", "5"]]
    >>> [(s.reward, s.label) for s in score(rows).scored]
    [(0.0, '6'), (0.0, '6'), (1.0, '6'), (0.0, '5'), (0.0, '5'), (1.0, '5')]
    """
    return score_by_vote(rollouts, voter or Voter(), [("original", "rephrased"), ("rephrased", "original")])


SPEC = register(
    MethodSpec(
        name="co_rewarding_1",
        kind="text",
        views=("original", "rephrased"),
        rewarded_views=("original", "rephrased"),
        score=score,
    )
)
