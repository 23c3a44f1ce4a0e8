"""Label and reward statistics of one scoring pass (methods.md section 10)."""

from __future__ import annotations

from collections.abc import Sequence

from corewarding.grading.answers import is_equiv_strict
from corewarding.methods.base import GroupLabel, ScoreResult, has_ground_truth


def label_accuracy(groups: Sequence[GroupLabel]) -> float | None:
    """Share of the groups with a ground truth whose label equals it under the strict reference checker.

    Blank ground truths count as none; None when no group has one; an empty label counts as wrong.
    """
    with_truth = [g for g in groups if has_ground_truth(g.ground_truth)]
    pairs = [(g.label, g.ground_truth) for g in with_truth if g.label is not None]
    equal = {pair: is_equiv_strict(*pair) for pair in set(pairs)}  # each distinct (label, truth) compared once
    return sum(map(equal.__getitem__, pairs)) / len(with_truth) if with_truth else None


def nonempty_label_rate(groups: Sequence[GroupLabel]) -> float:
    """Share of the groups whose vote gave a label (0.0 for no groups)."""
    return sum(1 for g in groups if g.label is not None) / len(groups) if groups else 0.0


def vote_agreement(groups: Sequence[GroupLabel]) -> float:
    """Share of the groups' rollouts whose answer matches their group's label (0.0 for no rollouts)."""
    sizes = sum(g.size for g in groups)
    return sum(g.agreeing for g in groups) / sizes if sizes else 0.0


def summarize(result: ScoreResult) -> dict[str, float | int | None]:
    """n, mean reward, share of groups with a non-empty label, label accuracy vs ground truth, vote agreement."""
    n = len(result.rewards)
    groups = result.groups
    return {
        "n": n,
        "mean_reward": sum(result.rewards) / n if n else 0.0,
        "groups": len(groups),
        "nonempty_label_rate": nonempty_label_rate(groups),
        "label_accuracy": label_accuracy(groups),
        "vote_agreement": vote_agreement(groups),
        "missing_ground_truth": result.missing_ground_truth,
    }
