"""Co-rewarding-II (model side): labels are the majority answer of an EMA teacher's samples of the same prompt.

The teacher, a slowly updated copy of the policy, samples G responses per prompt; the policy's rollouts are rewarded
for matching the majority of those answers. The teacher is also the KL anchor (training/local/teacher.py has the EMA).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from corewarding.methods.base import Rollout, ScoreResult
from corewarding.methods.cross_vote import score_by_vote
from corewarding.methods.registry import MethodSpec, register
from corewarding.methods.voting import Voter


def score(rollouts: Sequence[Rollout], voter: Voter | None = None) -> ScoreResult:
    """r_i = 1[a(y_i) = majority of the teacher's answers for the same uid, that majority non-empty].

    >>> box = lambda a: f"\\\\boxed{{{a}}}"
    >>> rows = [Rollout("u", "original", box(a)) for a in ["1", "2"]]
    >>> rows += [Rollout("u", "teacher", box(a)) for a in ["2", "2", "1"]]
    >>> [(s.reward, s.label) for s in score(rows).scored]
    [(0.0, '2'), (1.0, '2')]
    """
    return score_by_vote(rollouts, voter or Voter(), [("original", "teacher")])


def ema_rate(step: int, total_steps: int, alpha_start: float, alpha_end: float) -> float:
    """The share a_k of the policy mixed into the teacher at step k (1-based): a cosine from alpha_start to alpha_end.

    a_k = a_end + (a_start - a_end)(1 + cos(pi t / K)) / 2 with t = clip(k - 1, 0, K).

    >>> ema_rate(1, 100, 0.01, 1e-5)
    0.01
    >>> round(ema_rate(51, 100, 0.01, 1e-5), 6)
    0.005005
    """
    t = min(max(step - 1, 0), total_steps)
    return alpha_end + 0.5 * (alpha_start - alpha_end) * (1.0 + math.cos(math.pi * t / max(total_steps, 1)))


SPEC = register(
    MethodSpec(
        name="co_rewarding_2",
        kind="text",
        views=("original", "teacher"),
        rewarded_views=("original",),
        score=score,
        needs_teacher=True,
    )
)
