"""Turn one step's rollouts into rewards per view with a method core, plus the label metrics of section 10."""

from __future__ import annotations

from typing import Any

import torch

from corewarding.lm.rollout import RolloutBatch
from corewarding.methods import majority_voting
from corewarding.methods.base import Rollout
from corewarding.methods.registry import MethodSpec
from corewarding.methods.summary import summarize
from corewarding.methods.voting import Voter


def _as_rollouts(batches: dict[str, RolloutBatch]) -> tuple[list[Rollout], list[tuple[str, int]]]:
    rollouts, where = [], []
    for view, batch in batches.items():
        for i, (uid, text, truth) in enumerate(zip(batch.uids, batch.texts, batch.ground_truths, strict=True)):
            rollouts.append(Rollout(uid, view, text, truth))
            where.append((view, i))
    return rollouts, where


def _label_metrics(summary: dict[str, Any]) -> dict[str, Any]:
    keys = ("label_accuracy", "nonempty_label_rate", "vote_agreement", "missing_ground_truth")
    return {k: summary[k] for k in keys}


def score_step(
    spec: MethodSpec, batches: dict[str, RolloutBatch], voter: Voter
) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Rewards of every rewarded view, and label metrics.

    A method with per-view metrics (Co-rewarding-III) adds them. Methods without a vote of their own (GT, Entropy,
    Self-Certainty) report the majority vote of their own original rollouts as the diagnostic pseudo-label, so
    pseudo-label accuracy is comparable across methods.
    """
    rewards: dict[str, torch.Tensor] = {}
    if spec.kind == "text":
        assert spec.score is not None
        rollouts, where = _as_rollouts(batches)
        result = spec.score(rollouts, voter)
        for view in spec.rewarded_views:
            rewards[view] = torch.zeros(len(batches[view].uids))
        for s in result.scored:
            view, i = where[s.index]
            rewards[view][i] = s.reward
        if spec.name != "gt_grpo":
            metrics = _label_metrics(summarize(result))
            if spec.view_metrics is not None:
                metrics.update(spec.view_metrics(rollouts, result, voter))
            return rewards, metrics
    else:
        assert spec.sequence_reward is not None and spec.logits_statistic is not None
        for view in spec.rewarded_views:
            batch = batches[view]
            rewards[view] = spec.sequence_reward(batch.stats[spec.logits_statistic], batch.response_mask).float()
    own, _ = _as_rollouts({"original": batches["original"]})
    # its missing_ground_truth counts the original rollouts without a (non-blank) ground truth, as gt_grpo's does
    return rewards, _label_metrics(summarize(majority_voting.score(own, voter)))
