"""Label and reward statistics of one scoring pass (methods.md section 10)."""

from __future__ import annotations

from corewarding.answers import is_equiv_strict
from corewarding.methods.base import ScoreResult, has_ground_truth


def summarize(result: ScoreResult) -> dict[str, float | int | None]:
    """n, mean reward, share of groups with a non-empty label, label accuracy vs ground truth, vote agreement.

    Label accuracy counts the groups whose label equals the ground truth under the strict reference checker, over the
    groups that have a ground truth, blank ones counting as none (None when no group has one); an empty label counts
    as wrong.
    """
    n = len(result.rewards)
    groups = result.groups
    with_truth = [g for g in groups if has_ground_truth(g.ground_truth)]
    pairs = [(g.label, g.ground_truth) for g in with_truth if g.label is not None]
    equal = {pair: is_equiv_strict(*pair) for pair in set(pairs)}  # each distinct (label, truth) compared once
    correct = sum(map(equal.__getitem__, pairs))
    sizes = sum(g.size for g in groups)
    return {
        "n": n,
        "mean_reward": sum(result.rewards) / n if n else 0.0,
        "groups": len(groups),
        "nonempty_label_rate": sum(1 for g in groups if g.label is not None) / len(groups) if groups else 0.0,
        "label_accuracy": correct / len(with_truth) if with_truth else None,
        "vote_agreement": sum(g.agreeing for g in groups) / sizes if sizes else 0.0,
        "missing_ground_truth": result.missing_ground_truth,
    }
