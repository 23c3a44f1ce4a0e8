"""The one operation every voting method shares: reward a group with the vote of another group of the same uid."""

from __future__ import annotations

from collections.abc import Sequence

from corewarding.answers import extract_boxed_answer
from corewarding.methods.base import GroupLabel, Rollout, Scored, ScoreResult, group_indices, has_ground_truth
from corewarding.methods.voting import Voter


def score_by_vote(rollouts: Sequence[Rollout], voter: Voter, pairs: Sequence[tuple[str, str]]) -> ScoreResult:
    """For each (rewarded_view, voting_view): r_i = 1 if a(y_i) equals the majority of the voting view's answers.

    The voting group of a uid is the rollouts of ``voting_view`` with that uid; a missing or empty vote gives the
    label None and reward 0 to the whole group. Results are in input order. Rewarded rollouts without a (non-blank)
    ground truth are counted as missing: no reward depends on it, but label accuracy leaves their groups out.
    """
    answers = [extract_boxed_answer(r.response) for r in rollouts]
    scored: list[Scored] = []
    groups: list[GroupLabel] = []
    missing = 0
    for rewarded_view, voting_view in pairs:
        voters = group_indices(rollouts, voting_view)
        for uid, idx in group_indices(rollouts, rewarded_view).items():
            candidates = [answers[j] for j in voters.get(uid, [])]
            label, matches = voter.vote_and_match(candidates, [answers[i] for i in idx])
            for i, match in zip(idx, matches, strict=True):
                scored.append(Scored(i, 1.0 if match else 0.0, label))
            groups.append(GroupLabel(uid, rewarded_view, label, rollouts[idx[0]].ground_truth, sum(matches), len(idx)))
            missing += sum(not has_ground_truth(rollouts[i].ground_truth) for i in idx)
    scored.sort(key=lambda s: s.index)
    return ScoreResult(scored, groups, missing)
