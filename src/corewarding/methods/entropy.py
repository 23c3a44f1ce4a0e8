"""Entropy minimisation (RENT): reward = minus the mean token entropy of the rollout under the old policy."""

from __future__ import annotations

from typing import TYPE_CHECKING

from corewarding.methods.logits_rewards import masked_sequence_mean
from corewarding.methods.registry import MethodSpec, register

if TYPE_CHECKING:
    import torch


def sequence_reward(token_entropy: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """r_i = -(1/|y_i|) sum_t H(p_t); an empty response gets 0.

    >>> import torch
    >>> sequence_reward(torch.tensor([[0.5, 1.5, 7.0]]), torch.tensor([[1, 1, 0]]))
    tensor([-1.])
    """
    return -masked_sequence_mean(token_entropy, response_mask)


SPEC = register(
    MethodSpec(
        name="entropy",
        kind="logits",
        views=("original",),
        rewarded_views=("original",),
        sequence_reward=sequence_reward,
        logits_statistic="entropy",
        reward_unit="-nats",
    )
)
