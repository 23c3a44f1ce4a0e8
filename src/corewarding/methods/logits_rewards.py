"""Per-token statistics of the old policy's (temperature-scaled) logits, the inputs of the logits-based rewards."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # tensor methods only: importing a method never loads torch (rewards score stays light)
    import torch


def token_entropy(logits: torch.Tensor) -> torch.Tensor:
    """H(p_t) = logsumexp(z) - sum_j p_j z_j over the last dimension.

    >>> import torch
    >>> round(token_entropy(torch.zeros(1, 4)).item(), 6)  # uniform over 4 tokens: log 4
    1.386294
    """
    logp = logits.float().log_softmax(dim=-1)
    return -(logp.exp() * logp).sum(-1)


def token_self_certainty(logits: torch.Tensor) -> torch.Tensor:
    """logsumexp(z) - mean_j z_j, which equals KL(U || p_t) + log V (Intuitor's self-certainty).

    >>> import torch
    >>> token_self_certainty(torch.zeros(1, 4)).item()  # uniform: KL(U||U) + log 4
    1.3862943649291992
    """
    z = logits.float()
    return z.logsumexp(dim=-1) - z.mean(dim=-1)


def masked_sequence_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``values`` over the response tokens of each sequence; an empty response gives 0.

    >>> import torch
    >>> masked_sequence_mean(torch.tensor([[1.0, 3.0, 9.0], [5.0, 5.0, 5.0]]), torch.tensor([[1, 1, 0], [0, 0, 0]]))
    tensor([2., 0.])
    """
    mask = mask.to(values.dtype)
    return (values * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)
