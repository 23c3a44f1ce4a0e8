"""Co-rewarding-III (the paper's v3): the EMA teacher's vote on one view of a question labels the other view.

The policy and the teacher each sample G responses on the original question x and on its rephrasing x'. The policy's
rollouts on x are rewarded for matching the majority of the teacher's answers on x', and those on x' for matching
the teacher's majority on x: one binary reward, not a mix of Co-rewarding-I's and II's. The policy's own cross-view
vote (Co-rewarding-I's label) is computed for the metrics only. The teacher is II's (training/local/teacher.py:
the EMA).
"""

from __future__ import annotations

from collections.abc import Sequence

from corewarding.methods.base import VIEW_TAGS, Rollout, ScoreResult
from corewarding.methods.cross_vote import score_by_vote
from corewarding.methods.registry import MethodSpec, register
from corewarding.methods.summary import label_accuracy, nonempty_label_rate, vote_agreement
from corewarding.methods.voting import Voter

POLICY_VIEWS = ("original", "rephrased")
TEACHER_VIEWS = ("teacher_original", "teacher_rephrased")
LABELLED_BY = (("original", "teacher_rephrased"), ("rephrased", "teacher_original"))
POLICY_CROSS_VOTE = (("original", "rephrased"), ("rephrased", "original"))  # Co-rewarding-I's labels, logged only
LABEL_METRICS = ("pseudo_nonempty_rate", "pseudo_acc", "pseudo_pass_rate", "policypseudo_acc")  # {tag}_<name>


def teacher_view(view: str) -> str:
    """The view name of the teacher's rollouts on the prompts of policy view ``view``."""
    return f"teacher_{view}"


def score(rollouts: Sequence[Rollout], voter: Voter | None = None) -> ScoreResult:
    """r(y_i) = 1[a(y_i) = vote(teacher on x')], r(y'_i) = 1[a(y'_i) = vote(teacher on x)], a vote non-empty.

    >>> box = lambda a: f"\\\\boxed{{{a}}}"
    >>> rows = [Rollout("u", "original", box(a)) for a in ["5", "6"]]
    >>> rows += [Rollout("u", "rephrased", box(a)) for a in ["5", "6"]]
    >>> rows += [Rollout("u", "teacher_original", box(a)) for a in ["5", "5", "6"]]
    >>> rows += [Rollout("u", "teacher_rephrased", box(a)) for a in ["6", "6", "5"]]
    >>> [(s.reward, s.label) for s in score(rows).scored]
    [(0.0, '6'), (1.0, '6'), (1.0, '5'), (0.0, '5')]
    """
    return score_by_vote(rollouts, voter or Voter(), LABELLED_BY)


def view_metrics(rollouts: Sequence[Rollout], result: ScoreResult, voter: Voter) -> dict[str, float | None]:
    """Per policy view (``ori`` / ``aug``): the teacher label's non-empty rate, accuracy against the ground truth
    (logged, never a reward) and pass rate (share of the view's rollouts that match their label), and the accuracy
    of the policy's own cross-view label (``policypseudo_acc``, Co-rewarding-I's label).
    """
    own = score_by_vote(rollouts, voter, POLICY_CROSS_VOTE)
    metrics: dict[str, float | None] = {}
    for view, tag in VIEW_TAGS.items():
        groups = [g for g in result.groups if g.view == view]
        values = (
            nonempty_label_rate(groups),
            label_accuracy(groups),
            vote_agreement(groups),
            label_accuracy([g for g in own.groups if g.view == view]),
        )
        metrics.update({f"{tag}_{name}": value for name, value in zip(LABEL_METRICS, values, strict=True)})
    return metrics


SPEC = register(
    MethodSpec(
        name="co_rewarding_3",
        kind="text",
        views=POLICY_VIEWS + TEACHER_VIEWS,
        rewarded_views=POLICY_VIEWS,
        score=score,
        needs_teacher=True,
        complete_views=True,
        view_metrics=view_metrics,
    )
)
