"""Per-token statistics of the old policy's (temperature-scaled) logits, the inputs of the logits-based rewards."""

from __future__ import annotations

from collections.abc import Callable
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


DEFAULT_CHUNK_TOKENS = 1024  # fp32 working set per chunk: 1024 x V x 4 B (0.62 GB at V = 151,936)


def _self_certainty(z: torch.Tensor) -> torch.Tensor:
    z = z.float()
    return z.logsumexp(dim=-1) - z.mean(dim=-1)


def chunked_over_tokens(
    fn: Callable[[torch.Tensor], torch.Tensor], logits: torch.Tensor, chunk_tokens: int | None
) -> torch.Tensor:
    """``fn`` (logits -> per-token fp32 values) applied ``chunk_tokens`` positions at a time over all leading dims.

    Only one chunk is ever upcast to fp32, so the peak extra memory is ``chunk_tokens x V`` floats (times the few
    temporaries of ``fn``) instead of a copy of the whole logits. ``None`` or ``<= 0`` computes it in one go.
    """
    import torch  # here, not at module top: importing a method core never loads torch

    if chunk_tokens is None or chunk_tokens <= 0:
        return fn(logits)
    flat = logits.reshape(-1, logits.shape[-1])  # a view for the contiguous logits verl and the local backend pass
    out = torch.empty(flat.shape[0], dtype=torch.float32, device=logits.device)
    for start in range(0, flat.shape[0], chunk_tokens):
        out[start : start + chunk_tokens] = fn(flat[start : start + chunk_tokens])
    return out.reshape(logits.shape[:-1])


def token_self_certainty(logits: torch.Tensor, chunk_tokens: int | None = DEFAULT_CHUNK_TOKENS) -> torch.Tensor:
    """logsumexp(z) - mean_j z_j, which equals KL(U || p_t) + log V (Intuitor's self-certainty), in fp32.

    Computed ``chunk_tokens`` positions at a time (``chunked_over_tokens``): a 16 x 3,584 x 151,936 batch would
    otherwise need ~35 GB for its fp32 copy alone. Not differentiable through the chunks' writes: call it on
    detached logits or under ``torch.no_grad`` (both callers do).

    >>> import torch
    >>> token_self_certainty(torch.zeros(1, 4)).item()  # uniform: KL(U||U) + log 4
    1.3862943649291992
    """
    return chunked_over_tokens(_self_certainty, logits, chunk_tokens)


def masked_sequence_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``values`` over the response tokens of each sequence; an empty response gives 0.

    >>> import torch
    >>> masked_sequence_mean(torch.tensor([[1.0, 3.0, 9.0], [5.0, 5.0, 5.0]]), torch.tensor([[1, 1, 0], [0, 0, 0]]))
    tensor([2., 0.])
    """
    mask = mask.to(values.dtype)
    return (values * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)
