"""Reward managers for verl: thin adapters from a verl batch to the method cores (never a second implementation).

* ``CorewardingRewardManager`` (one subclass per method, registered in verl's batch registry
  ``verl.workers.reward_manager`` as ``corewarding_<method>``) scores a whole batch at once: votes need every
  rollout of a group, and Co-rewarding-I/II need rows of other views. It calls ``training.rewards.score_step``,
  the local backend's own step scorer.
* ``GroundTruthRewardLoopManager`` (verl's per-sample reward loop, ``corewarding_gt``) gives each rollout its strict
  ground-truth score as it is generated: validation accuracy, and the placeholder the trainer replaces by the
  method's group reward.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf
from verl import DataProto
from verl.experimental.reward_loop.reward_manager.base import RewardManagerBase
from verl.workers.reward_manager.abstract import AbstractRewardManager

from corewarding import methods
from corewarding.grading.answers import strict_score
from corewarding.methods.voting import Voter, voter_from_config
from corewarding.training.rewards import score_step
from corewarding.training.verl.batch import STAT_KEY, ground_truth_of, response_mask_of, token_level, view_batches

log = logging.getLogger(__name__)

MANAGER_PREFIX = "corewarding_"
GT_LOOP_MANAGER = "corewarding_gt"
DEFAULT_VOTE = {"canonicalize": "exact", "math_verify_workers": 2, "math_verify_timeout_s": 5.0}


def manager_name(reward: str) -> str:
    """The registered name of the batch reward manager of a method's reward core."""
    return f"{MANAGER_PREFIX}{reward}"


@dataclass
class BatchScores:
    """One batch's sequence rewards (0 on rows of views the method does not train on) and its label metrics."""

    sequence_rewards: torch.Tensor
    rewarded: np.ndarray
    metrics: dict[str, Any] = field(default_factory=dict)


def score_batch(reward: str, data: DataProto, tokenizer: Any, voter: Voter) -> BatchScores:
    """Score a verl batch with the method core ``reward`` exactly as the local backend scores one step."""
    spec = methods.get(reward)
    if spec.kind == "logits" and STAT_KEY not in data.batch:
        raise ValueError(f"method {reward!r} rewards a per-token {spec.logits_statistic}; the batch has no {STAT_KEY}")
    batches, rows = view_batches(data, tokenizer, spec.logits_statistic)
    missing = [v for v in spec.views if v not in batches]
    if missing:
        raise ValueError(f"method {reward!r} needs rollouts of view(s) {missing}; the batch has {sorted(batches)}")
    per_view, metrics = score_step(spec, batches, voter)
    rewards = torch.zeros(len(data), dtype=torch.float32)
    rewarded = np.zeros(len(data), dtype=bool)
    for view, values in per_view.items():
        idx = torch.as_tensor(rows[view], dtype=torch.long)
        rewards[idx] = values.detach().float().cpu()
        rewarded[rows[view]] = True
    metrics["reward_mean"] = float(rewards[torch.as_tensor(rewarded)].mean()) if rewarded.any() else 0.0
    counts = voter.checker_counts()
    if counts:  # cumulative math-verify timeouts/errors, as the local backend reports them
        metrics["math_verify_timeouts"] = counts.get("timeout", 0)
        metrics["math_verify_errors"] = counts.get("error", 0)
    return BatchScores(rewards, rewarded, metrics)


class CorewardingRewardManager(AbstractRewardManager):
    """verl batch reward manager over a method core; subclasses set ``reward`` (see ``registered_managers``)."""

    reward: ClassVar[str] = ""

    def __init__(
        self,
        tokenizer: Any,
        num_examine: int = 0,
        compute_score: Any = None,
        reward_fn_key: str = "data_source",
        vote: DictConfig | dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if not self.reward:
            raise TypeError("use a registered subclass (corewarding_<method>), not the base manager")
        self.tokenizer = tokenizer
        self.num_examine = num_examine
        self.voter = voter_from_config(OmegaConf.create(dict(vote or DEFAULT_VOTE)))
        self.last_metrics: dict[str, Any] = {}

    def __call__(self, data: DataProto, return_dict: bool = False) -> torch.Tensor | dict[str, Any]:
        scores = score_batch(self.reward, data, self.tokenizer, self.voter)
        reward_tensor = token_level(scores.sequence_rewards, response_mask_of(data))
        self.last_metrics = scores.metrics
        if not return_dict:
            return reward_tensor
        extra = {"cr_reward": scores.sequence_rewards.tolist(), "cr_rewarded": scores.rewarded.tolist()}
        return {"reward_tensor": reward_tensor, "reward_extra_info": extra, "metrics": scores.metrics}

    def close(self) -> None:
        """Stop math-verify workers, if any."""
        self.voter.close()


def registered_managers() -> dict[str, type[CorewardingRewardManager]]:
    """One manager class per method core, keyed by its verl name (``corewarding_gt_grpo``, ...)."""
    made: dict[str, type[CorewardingRewardManager]] = {}
    for name in methods.names():
        attrs = {"reward": name, "__module__": __name__, "__doc__": f"Batch reward manager of method core {name!r}."}
        made[manager_name(name)] = type(
            f"{name.title().replace('_', '')}RewardManager", (CorewardingRewardManager,), attrs
        )
    return made


class GroundTruthRewardLoopManager(RewardManagerBase):
    """Per-sample strict ground-truth reward for verl's reward loop (the reference's ``naive`` GT checker).

    A blank or missing ground truth scores 0, as in the local backend.
    """

    tokenizer: Any

    def __init__(
        self,
        config: DictConfig,
        tokenizer: Any,
        compute_score: Any = None,
        reward_router_address: str | None = None,
        reward_model_tokenizer: Any = None,
    ) -> None:
        super().__init__(config, tokenizer, compute_score)

    async def run_single(self, data: DataProto) -> dict[str, Any]:
        item = data[-1:]
        mask = response_mask_of(item)[0].bool()
        ids = item.batch["responses"][0][mask].tolist()
        text = await self.loop.run_in_executor(None, lambda: self.tokenizer.decode(ids, skip_special_tokens=True))
        truth = ground_truth_of(item.non_tensor_batch["reward_model"][0])
        score = 0.0 if truth is None or not truth.strip() else float(strict_score(text, truth))
        return {"reward_score": score, "reward_extra_info": {"acc": score}}
