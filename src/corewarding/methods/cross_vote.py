"""The one operation every voting method shares: reward a group with the vote of another group of the same uid."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import islice, repeat
from operator import attrgetter, gt

from corewarding.grading.answers import extract_boxed_answer
from corewarding.methods.base import GroupLabel, Rollout, ScoreResult, groups_by_view, has_ground_truth
from corewarding.methods.voting import Voter

_RESPONSE = attrgetter("response")
_TRUTH = attrgetter("ground_truth")


def score_by_vote(rollouts: Sequence[Rollout], voter: Voter, pairs: Sequence[tuple[str, str]]) -> ScoreResult:
    """For each (rewarded_view, voting_view): r_i = 1 if a(y_i) equals the majority of the voting view's answers.

    The voting group of a uid is the rollouts of ``voting_view`` with that uid; a missing or empty vote gives the
    label None and reward 0 to the whole group. Results are in input order. Rewarded rollouts without a (non-blank)
    ground truth are counted as missing: no reward depends on it, but label accuracy leaves their groups out.
    """
    # Column-wise, with C-level map() loops where possible: this runs once per 100k-row dump (perf/cli_perf.py).
    answers = list(map(extract_boxed_answer, map(_RESPONSE, rollouts)))  # once per row, whichever groups read it
    indices: list[int] = []
    rewards: list[float] = []
    labels: list[str | None] = []
    groups: list[GroupLabel] = []
    vote = voter.vote_and_match
    by_view = groups_by_view(rollouts)
    for rewarded_view, voting_view in pairs:
        voters = by_view.get(voting_view, {})
        for uid, idx in by_view.get(rewarded_view, {}).items():
            label, matches = vote([answers[j] for j in voters.get(uid, ())], [answers[i] for i in idx])
            indices += idx
            rewards += map(float, matches)
            labels += repeat(label, len(idx))
            truth = rollouts[idx[0]].ground_truth
            groups.append(GroupLabel(uid, rewarded_view, label, truth, sum(matches), len(idx)))
    result = ScoreResult(indices, rewards, labels, groups, _missing_truths(rollouts, [r for r, _ in pairs]))
    return _in_input_order(result)


def _in_input_order(result: ScoreResult) -> ScoreResult:
    """``result`` with its columns sorted by rollout index; as it is when they already are (one uid at a time, one
    rewarded view: the usual dump of majority voting).
    """
    indices = result.indices
    if not any(map(gt, indices, islice(indices, 1, None))):
        return result
    order = sorted(range(len(indices)), key=indices.__getitem__)
    result.indices = list(map(indices.__getitem__, order))
    result.rewards = list(map(result.rewards.__getitem__, order))
    result.labels = list(map(result.labels.__getitem__, order))
    return result


def _missing_truths(rollouts: Sequence[Rollout], rewarded_views: list[str]) -> int:
    """Rewarded rollouts (once per pair that rewards their view) whose ground truth is absent or blank."""
    truths = list(map(_TRUTH, rollouts))
    blank = {t for t in set(truths) if not has_ground_truth(t)}  # few distinct truths: test each once
    if not blank:  # the common case: no per-row loop
        return 0
    return sum(rewarded_views.count(r.view) for r, t in zip(rollouts, truths, strict=True) if t in blank)
