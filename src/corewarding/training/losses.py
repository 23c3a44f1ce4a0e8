"""The GRPO actor loss pieces of methods.md section 1.0: PPO clip with dual clip, k3 KL, token-mean, LR schedule."""

from __future__ import annotations

import math

import torch


def masked_token_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over all unmasked tokens of the batch (verl's ``token-mean``); 0 when nothing is unmasked."""
    mask = mask.to(values.dtype)
    return (values * mask).sum() / mask.sum().clamp(min=1.0)


def ppo_clip_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    clip_c: float = 3.0,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Token-mean of max(-A r, -A clip(r)), capped at -c A where A < 0 (dual clip).

    >>> lp = torch.log(torch.tensor([[1.5, 0.5, 10.0]]))
    >>> loss, _ = ppo_clip_loss(lp, torch.zeros(1, 3), torch.tensor([[1.0, -1.0, -1.0]]), torch.ones(1, 3))
    >>> round(loss.item(), 4)  # (-1.2 + 0.8 + 3.0) / 3: clipped gain, clipped loss, dual-clipped loss
    0.8667
    """
    ratio = torch.exp(torch.clamp(logp - old_logp, min=-20.0, max=20.0))  # as verl: no overflow to inf/NaN
    loss_unclipped = -advantages * ratio
    loss_clipped = -advantages * torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
    clipped = torch.maximum(loss_unclipped, loss_clipped)
    dual = torch.minimum(-advantages * clip_c, clipped)
    per_token = torch.where(advantages < 0, dual, clipped)
    clipfrac = masked_token_mean((loss_clipped > loss_unclipped).float(), mask)
    return masked_token_mean(per_token, mask), {"clipfrac": float(clipfrac)}


def low_var_kl(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """The k3 estimator: with d = ref - logp clamped to +-20, e^d - d - 1 clamped to +-10.

    >>> low_var_kl(torch.tensor([0.0]), torch.tensor([0.0])).item()
    0.0
    >>> round(low_var_kl(torch.tensor([0.0]), torch.tensor([1.0])).item(), 4)  # e - 2
    0.7183
    """
    d = torch.clamp(ref_logp - logp, min=-20.0, max=20.0)
    return torch.clamp(torch.exp(d) - d - 1.0, min=-10.0, max=10.0)


def warmup_cosine_factor(
    step: int, total_steps: int, warmup_steps: int, min_lr_ratio: float = 0.0, num_cycles: float = 0.5
) -> float:
    """LR multiplier at optimizer step ``step`` (0-based): linear warmup from 0, then cosine to ``min_lr_ratio``.

    >>> [round(warmup_cosine_factor(s, 10, 2), 3) for s in (0, 1, 2, 6, 10)]
    [0.0, 0.5, 1.0, 0.5, 0.0]
    """
    if step < warmup_steps:
        return step / max(1, warmup_steps)
    progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)
    cosine = math.cos(math.pi * num_cycles * 2.0 * progress)
    return max(min_lr_ratio, cosine * (1.0 - min_lr_ratio) * 0.5 + (1.0 + min_lr_ratio) * 0.5)
