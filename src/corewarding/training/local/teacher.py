"""The Co-rewarding-II teacher: an fp32 copy of the policy, moved towards it by an exponential moving average."""

from __future__ import annotations

import torch


@torch.no_grad()
def ema_update(teacher: torch.nn.Module, policy: torch.nn.Module, rate: float) -> None:
    """teacher <- (1 - rate) * teacher + rate * policy, in place and elementwise (teacher kept in its own dtype)."""
    policy_params = dict(policy.named_parameters())
    for name, param in teacher.named_parameters():
        source = policy_params[name].detach().to(param.dtype)
        param.mul_(1.0 - rate).add_(source, alpha=rate)
