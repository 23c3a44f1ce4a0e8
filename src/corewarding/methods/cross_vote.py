"""The one operation every voting method shares: reward a group with the vote of another group of the same uid."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import repeat

from corewarding.answers import extract_boxed_answer
from corewarding.methods.base import GroupLabel, Rollout, Scored, ScoreResult, groups_by_view, has_ground_truth
from corewarding.methods.voting import Voter


def score_by_vote(rollouts: Sequence[Rollout], voter: Voter, pairs: Sequence[tuple[str, str]]) -> ScoreResult:
    """For each (rewarded_view, voting_view): r_i = 1 if a(y_i) equals the majority of the voting view's answers.

    The voting group of a uid is the rollouts of ``voting_view`` with that uid; a missing or empty vote gives the
    label None and reward 0 to the whole group. Results are in input order. Rewarded rollouts without a (non-blank)
    ground truth are counted as missing: no reward depends on it, but label accuracy leaves their groups out.
    """
    # Column-wise, with C-level map() loops where possible: this runs once per 100k-row dump (benchmarks/cli_perf.py).
    answers = list(map(extract_boxed_answer, (r.response for r in rollouts)))
    truths = [r.ground_truth for r in rollouts]
    blank = {t for t in set(truths) if not has_ground_truth(t)}  # few distinct truths: test each once
    scored: list[Scored] = []
    groups: list[GroupLabel] = []
    missing = 0
    by_view = groups_by_view(rollouts)
    for rewarded_view, voting_view in pairs:
        voters = by_view.get(voting_view, {})
        for uid, idx in by_view.get(rewarded_view, {}).items():
            candidates = [answers[j] for j in voters.get(uid, ())]
            label, matches = voter.vote_and_match(candidates, [answers[i] for i in idx])
            rows = zip(idx, map(float, matches), repeat(label))
            scored.extend(map(tuple.__new__, repeat(Scored), rows))  # Scored(i, reward, label) without a Python call
            groups.append(GroupLabel(uid, rewarded_view, label, truths[idx[0]], sum(matches), len(idx)))
            missing += sum(map(blank.__contains__, [truths[i] for i in idx]))
    scored.sort()  # by index: a Scored is a tuple that starts with it, and indices are unique
    return ScoreResult(scored, groups, missing)
