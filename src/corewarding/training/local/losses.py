"""The GRPO actor loss pieces of methods.md section 1.0: PPO clip with dual clip, k3 KL, token-mean, LR schedule."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from corewarding.methods.base import PER_VIEW_LOSS_METRICS, VIEW_TAGS


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

    The stats are verl's ``compute_policy_loss_vanilla`` metrics over the masked tokens: ``clipfrac`` (share of tokens
    where the clipped term is the larger), ``ppo_kl`` (mean of old - new log-prob, the difference clamped to +-20 as
    verl clamps it), and the token count ``tokens``.

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
    ppo_kl = masked_token_mean(-torch.clamp(logp.detach() - old_logp, min=-20.0, max=20.0), mask)  # verl's
    stats = {"clipfrac": float(clipfrac), "ppo_kl": float(ppo_kl), "tokens": float(mask.sum())}
    return masked_token_mean(per_token, mask), stats


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


@dataclass
class StepLossMetrics:
    """One optimizer step's loss metrics over its micro-batches and trained views (docs/training.md, "What the loss
    metrics mean"; verl's ``view_loss`` reports the same names with the same meaning).

    * ``pg_loss``, ``kl_mean``: the sum over the trained views of the view's term (the objective's sum, as optimised);
    * ``pg_loss_<tag>``, ``kl_mean_<tag>``: a view's PPO / k3 KL token-mean per micro-batch, averaged over the
      micro-batches (the loss divides per micro-batch, as the reference did);
    * ``clipfrac``: the clipped share of each micro-batch's response tokens (all trained views), averaged over the
      micro-batches (verl's ``actor/pg_clipfrac``);
    * ``clipfrac_<tag>``, ``ppo_kl_<tag>``: over all of the view's response tokens of the step.

    The ``_<tag>`` metrics are reported only when two views are trained (Co-rewarding-I, III).

    >>> m = StepLossMetrics(n_micro=1)
    >>> m.add("original", 0.5, 0.1, {"clipfrac": 0.25, "ppo_kl": 0.0, "tokens": 4.0})
    >>> m.end_micro_batch()
    >>> m.result()
    {'pg_loss': 0.5, 'kl_mean': 0.1, 'clipfrac': 0.25}
    """

    n_micro: int
    views: dict[str, dict[str, float]] = field(default_factory=dict)
    micro_clipfracs: list[float] = field(default_factory=list)
    _clipped: float = 0.0
    _tokens: float = 0.0

    def add(self, view: str, pg: float, kl: float, stats: dict[str, float]) -> None:
        """One view's loss terms in the current micro-batch (``stats`` from ``ppo_clip_loss``)."""
        sums = self.views.setdefault(view, {"pg_loss": 0.0, "kl_mean": 0.0, "clipped": 0.0, "kl": 0.0, "tokens": 0.0})
        sums["pg_loss"] += pg / self.n_micro
        sums["kl_mean"] += kl / self.n_micro
        sums["clipped"] += stats["clipfrac"] * stats["tokens"]
        sums["kl"] += stats["ppo_kl"] * stats["tokens"]
        sums["tokens"] += stats["tokens"]
        self._clipped += stats["clipfrac"] * stats["tokens"]
        self._tokens += stats["tokens"]

    def end_micro_batch(self) -> None:
        self.micro_clipfracs.append(self._clipped / self._tokens if self._tokens else 0.0)
        self._clipped = self._tokens = 0.0

    def result(self) -> dict[str, float]:
        """The step's metrics, per-view ones suffixed with the view's ``VIEW_TAGS`` tag."""
        out = {
            "pg_loss": sum(v["pg_loss"] for v in self.views.values()),
            "kl_mean": sum(v["kl_mean"] for v in self.views.values()),
            "clipfrac": sum(self.micro_clipfracs) / len(self.micro_clipfracs) if self.micro_clipfracs else 0.0,
        }
        if len(self.views) > 1:
            for view, sums in self.views.items():
                tokens = sums["tokens"] or 1.0
                per_view = {
                    "pg_loss": sums["pg_loss"], "kl_mean": sums["kl_mean"], "clipfrac": sums["clipped"] / tokens,
                    "ppo_kl": sums["kl"] / tokens,
                }  # fmt: skip
                out |= {f"{name}_{VIEW_TAGS[view]}": per_view[name] for name in PER_VIEW_LOSS_METRICS}
        return out
