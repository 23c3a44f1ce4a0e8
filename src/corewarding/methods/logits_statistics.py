"""The registry of per-token logits statistics: what a logits method's reward reads, by name.

A statistic maps the old policy's temperature-scaled logits of the response positions, shape ``(..., V)``, to one fp32
value per position, shape ``(...)``; the method's ``sequence_reward`` then reduces it over each response's mask. A
method names the statistic it reads (``MethodSpec.logits_statistic``), and every trainer computes the statistics a
method declares without naming them: the local backend in its log-prob pass (``lm.rollout.token_logprobs``), verl in
its old-log-prob pass (``training.verl.worker``'s probe; verl's own pass already returns the entropy).

Importing this module never loads torch (``rewards score`` stays light).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from corewarding.methods.logits_rewards import (
    DEFAULT_CHUNK_TOKENS,
    chunked_over_tokens,
    token_entropy,
    token_self_certainty,
)

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class LogitsStatistic:
    """A named per-token statistic of the logits.

    ``per_token`` maps logits ``(..., V)`` to fp32 values ``(...)``. ``chunked``: computed ``chunk_tokens`` positions
    at a time, so only one chunk is upcast to fp32 at once (``chunked_over_tokens``); it must then treat each position
    on its own. ``fp32_copies``: how many fp32 arrays the size of the logits it works on (a chunk's, or the whole
    micro-batch's when not chunked) it holds at once, for the verl memory plan.
    """

    name: str
    per_token: Callable[[torch.Tensor], torch.Tensor]
    chunked: bool = False
    fp32_copies: int = 2

    def compute(self, logits: torch.Tensor, chunk_tokens: int | None = DEFAULT_CHUNK_TOKENS) -> torch.Tensor:
        """The statistic of every position of ``logits``; ``chunk_tokens`` applies to a chunked statistic only."""
        if self.chunked:
            return chunked_over_tokens(self.per_token, logits, chunk_tokens)
        return self.per_token(logits)


_STATISTICS: dict[str, LogitsStatistic] = {}


def register_statistic(statistic: LogitsStatistic) -> LogitsStatistic:
    """Add a statistic; a second registration under the same name is an error."""
    if statistic.name in _STATISTICS:
        raise ValueError(f"logits statistic {statistic.name!r} is already registered")
    _STATISTICS[statistic.name] = statistic
    return statistic


def logits_statistic(name: str) -> LogitsStatistic:
    """The registered statistic ``name``."""
    try:
        return _STATISTICS[name]
    except KeyError:
        known = ", ".join(sorted(_STATISTICS))
        raise KeyError(f"unknown logits statistic {name!r}; known: {known}") from None


def statistic_names() -> list[str]:
    return sorted(_STATISTICS)


# H(p_t), computed in one go (a log-softmax, its exp and their product: fp32 copies of the logits).
ENTROPY = register_statistic(LogitsStatistic("entropy", token_entropy, chunked=False, fp32_copies=3))
# logsumexp(z) - mean(z): its fp32 chunk and logsumexp's temporary (docs/gpu-fixes.md).
SELF_CERTAINTY = register_statistic(
    LogitsStatistic("self_certainty", partial(token_self_certainty, chunk_tokens=None), chunked=True, fp32_copies=2)
)
