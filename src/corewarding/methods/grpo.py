"""GRPO group-normalised advantages (verl's ``compute_grpo_outcome_advantage`` semantics)."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import torch


def grpo_advantages(
    scores: torch.Tensor, groups: Sequence[Hashable], epsilon: float = 1e-6, norm_by_std: bool = True
) -> torch.Tensor:
    """Per-sequence advantages A_i = (s_i - mean_g) / (std_g + eps), std unbiased; a singleton group uses 0 and 1.

    Equal rewards in a group give zero advantages (no division by zero).

    >>> [round(a, 4) for a in grpo_advantages(torch.tensor([1.0, 0.0, 0.0, 1.0]), ["a", "a", "b", "b"]).tolist()]
    [0.7071, -0.7071, -0.7071, 0.7071]
    >>> [round(a, 4) for a in grpo_advantages(torch.tensor([1.0, 1.0, 2.0]), ["a", "a", "b"]).tolist()]
    [0.0, 0.0, 2.0]
    >>> grpo_advantages(torch.tensor([1.0, 0.0]), ["a", "a"], norm_by_std=False).tolist()
    [0.5, -0.5]
    """
    if scores.dim() != 1 or len(groups) != scores.shape[0]:
        raise ValueError(f"scores must be 1-D with one group key each, got {tuple(scores.shape)} and {len(groups)}")
    members: dict[Hashable, list[int]] = {}
    for i, g in enumerate(groups):
        members.setdefault(g, []).append(i)
    advantages = torch.zeros_like(scores, dtype=torch.float32)
    for idx in members.values():
        group = scores[idx].float()
        if len(idx) == 1:
            mean, std = torch.tensor(0.0), torch.tensor(1.0)
        else:
            mean, std = group.mean(), group.std(unbiased=True)
        centred = group - mean
        advantages[idx] = centred / (std + epsilon) if norm_by_std else centred
    return advantages
