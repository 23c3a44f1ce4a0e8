"""Self-Certainty (Intuitor): reward = mean over response tokens of KL(U || p_t) + log V under the old policy."""

from __future__ import annotations

from typing import TYPE_CHECKING

from corewarding.methods.logits_rewards import masked_sequence_mean
from corewarding.methods.registry import MethodSpec, register

if TYPE_CHECKING:
    import torch


def sequence_reward(token_self_certainty: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """r_i = masked mean of the per-token self-certainty; an empty response gets 0.

    >>> import torch
    >>> sequence_reward(torch.tensor([[2.0, 4.0], [1.0, 1.0]]), torch.tensor([[1, 1], [1, 0]]))
    tensor([3., 1.])
    """
    return masked_sequence_mean(token_self_certainty, response_mask)


SPEC = register(
    MethodSpec(
        name="self_certainty",
        kind="logits",
        views=("original",),
        rewarded_views=("original",),
        sequence_reward=sequence_reward,
        logits_statistic="self_certainty",
        reward_unit="nats",
    )
)
