"""GT-GRPO: reward 1 when the last ``\\boxed{}`` answer equals the ground truth under the reference's strict checker."""

from __future__ import annotations

from collections.abc import Sequence

from corewarding.grading.answers import strict_score
from corewarding.methods.base import GroupLabel, Rollout, Scored, ScoreResult, group_indices, has_ground_truth
from corewarding.methods.registry import MethodSpec, register
from corewarding.methods.voting import Voter


def score(rollouts: Sequence[Rollout], voter: Voter | None = None) -> ScoreResult:
    """Reward = ``strict_score(response, ground_truth)``; a row without ground truth gets 0 and is counted.

    A blank ground truth counts as missing and gives the label None. (The reference would score an empty ``\\boxed{}``
    1 against it; MATH train has two such rows.)

    >>> rows = [Rollout("u", "original", "so \\\\boxed{\\\\dfrac12}", "0.5"), Rollout("u", "original", "no", None)]
    >>> [(s.reward, s.label) for s in score(rows).scored], score(rows).missing_ground_truth
    ([(1.0, '0.5'), (0.0, None)], 1)
    """
    scored: list[Scored] = []
    groups: list[GroupLabel] = []
    missing = 0
    for uid, idx in group_indices(rollouts, "original").items():
        agreeing = 0
        for i in idx:
            truth = rollouts[i].ground_truth
            if has_ground_truth(truth):
                reward = strict_score(rollouts[i].response, truth)
            else:
                truth, reward = None, 0.0
                missing += 1
            agreeing += reward > 0
            scored.append(Scored(i, reward, truth))
        truth = rollouts[idx[0]].ground_truth
        label = truth if has_ground_truth(truth) else None
        groups.append(GroupLabel(uid, "original", label, truth, agreeing, len(idx)))
    scored.sort(key=lambda s: s.index)
    return ScoreResult.from_scored(scored, groups, missing)


SPEC = register(
    MethodSpec(
        name="gt_grpo",
        kind="text",
        views=("original",),
        rewarded_views=("original",),
        score=score,
        needs_ground_truth=True,
    )
)
