"""Co-rewarding-I's policy loss: the sum of one token-mean per view, as the reference computes it.

verl 0.9.1's ``ppo_loss`` takes one token-mean over every response of the mini-batch. The reference
(``I/verl/workers/actor/dp_actor.py``) computes ``(PPO_ori + c KL_ori) + (PPO_aug + c KL_aug)``, each a token-mean over
its own view, so its loss (and gradient) is about twice verl's and gradient clipping at 1.0 bites at the same point
only with the per-view sum. ``view_sum_ppo_loss`` reproduces the sum on verl's own loss code: for each view ``v`` it
calls ``ppo_loss`` with the response mask restricted to the rows of ``v`` and scales it by ``N / N_v`` (tokens of the
mini-batch over tokens of view ``v``), which turns verl's ``sum_{t in v} l_t / N`` into ``sum_{t in v} l_t / N_v``.

``N_v / N`` is each view's token share of the whole training batch over all data-parallel ranks (``tag_views``, in
the worker's ``update_actor``): exact when the mini-batch is the batch (the paper's setup, one optimizer step per
step); with smaller mini-batches it uses the batch's share for each mini-batch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from tensordict import TensorDict
from verl.utils import tensordict_utils as tu
from verl.utils.metric import AggregationType, Metric
from verl.workers.utils.losses import ppo_loss

from corewarding.methods.base import VIEW_TAGS

VIEW_ID_KEY = "cr_view_id"  # per row: index into the views present in the batch
VIEW_WEIGHT_KEY = "cr_view_weight"  # per row: N / N_v of the row's view, over the whole batch
VIEW_EXTRA_KEY = "cr_view"  # extra_info key naming a row's view (set by the data preparation)
VIEW_NAMES = ("original", "rephrased")  # the two views of a pair cell, in a fixed order on every rank
SWITCH_KEY = "corewarding_view_sum_loss"  # actor_rollout_ref key, true for pair (two-view) cells; else verl's mean
SUMMED_METRICS = ("actor/pg_loss", "kl_loss", "actor/entropy_loss")  # loss terms: the sum of the views' token-means
PER_VIEW_METRICS = {  # verl's metric -> its per-view name (before the _ori / _aug tag; verl adds actor/ to kl_loss)
    "actor/pg_loss": "actor/pg_loss", "kl_loss": "actor/kl_loss", "actor/pg_clipfrac": "actor/pg_clipfrac",
    "actor/ppo_kl": "actor/ppo_kl",
}  # fmt: skip


def row_views(data: TensorDict) -> list[str]:
    """Each row's view name from ``extra_info.cr_view``; a row without one is an error (never a silent fallback)."""
    extras = tu.get(data, "extra_info", None)
    if extras is None:
        raise KeyError(f"{SWITCH_KEY} is on but the actor's batch has no extra_info (the rows' {VIEW_EXTRA_KEY})")
    views = [e.get(VIEW_EXTRA_KEY) if isinstance(e, dict) else None for e in extras]
    missing = [i for i, v in enumerate(views) if v is None]
    if missing:
        raise KeyError(f"{SWITCH_KEY} is on but rows {missing[:5]} lack extra_info.{VIEW_EXTRA_KEY}")
    return [str(v) for v in views]


def tag_views(data: TensorDict, views: Sequence[str], all_reduce: Callable[[torch.Tensor], None] | None = None) -> int:
    """Add per-row ``cr_view_id`` and ``cr_view_weight`` (``N / N_v``) to ``data``; returns the views present here.

    ``all_reduce`` sums the per-view token counts (a CPU float64 tensor) over the data-parallel ranks, in place;
    ``None`` counts this rank's rows only.
    """
    unknown = sorted(set(views) - set(VIEW_NAMES))
    if unknown:
        raise ValueError(f"unknown view(s) {unknown} in extra_info.{VIEW_EXTRA_KEY}; expected {list(VIEW_NAMES)}")
    # one slot per known view on every rank (a rank's shard may hold one view only), so the all-reduce matches
    ids = torch.as_tensor([VIEW_NAMES.index(v) for v in views], dtype=torch.long)
    tokens = data["response_mask"].to(torch.float64).sum(-1).cpu()
    counts = torch.zeros(len(VIEW_NAMES), dtype=torch.float64).index_add_(0, ids, tokens)
    if all_reduce is not None:
        all_reduce(counts)
    present = sorted(set(views), key=VIEW_NAMES.index)
    empty = [v for v in present if counts[VIEW_NAMES.index(v)] == 0]
    if empty:
        raise ValueError(f"view(s) {empty} have no response tokens in this batch")
    device = data["response_mask"].device
    data[VIEW_ID_KEY] = ids.to(device)
    data[VIEW_WEIGHT_KEY] = (counts.sum() / counts)[ids].to(device=device, dtype=torch.float32)
    return len(present)


def view_sum_ppo_loss(
    config: Any, model_output: dict[str, Any], data: TensorDict, dp_group: Any = None
) -> tuple[torch.Tensor, dict[str, Any]]:
    """sum_v (N / N_v) * ppo_loss(rows of view v): the sum of the per-view token-means (PPO + KL + entropy terms).

    Metrics (docs/training.md, "What the loss metrics mean"): ``actor/pg_loss``, ``kl_loss`` and
    ``actor/entropy_loss`` are the sums over the views of the views' token-means, as optimised (verl's own would be one
    token-mean over both views); ``actor/pg_clipfrac`` and ``actor/ppo_kl`` stay verl's, over all rows. Per view, always
    both views in every micro-batch (0 for a view without rows in it): ``actor/{pg_loss,kl_loss,pg_clipfrac,ppo_kl}_
    {ori,aug}``, each the view's token-mean over the mini-batch once verl's engine adds up the micro-batches.
    """
    _, metrics = ppo_loss(config, model_output, data, dp_group)
    if VIEW_ID_KEY not in data.keys():  # noqa: SIM118  (TensorDict refuses `in`)
        raise KeyError(f"{VIEW_ID_KEY} is missing: tag_views was not run on this batch")
    view_ids, weights, mask = data[VIEW_ID_KEY], data[VIEW_WEIGHT_KEY], data["response_mask"]
    total = torch.zeros((), device=mask.device)
    if data["batch_num_tokens"] is None:  # verl's engines set it for every mini-batch
        raise ValueError(f"{SWITCH_KEY} needs the mini-batch's batch_num_tokens (set by verl's engine)")
    scale = float(data["dp_size"]) / float(data["batch_num_tokens"])  # dp / N, as verl's agg_loss divides
    per_view = {name: dict.fromkeys(PER_VIEW_METRICS, 0.0) for name in VIEW_NAMES}  # a view without rows here: 0
    for view in view_ids.unique().tolist():  # the views with rows in this micro-batch
        rows = view_ids == view
        part = data.copy()
        part["response_mask"] = mask * rows.to(mask.dtype).unsqueeze(-1)
        loss, part_metrics = ppo_loss(config, model_output, part, dp_group)
        weight = float(weights[rows][0])
        total = total + loss * weight
        per_view[VIEW_NAMES[view]] = _per_view(part_metrics, weight, weight * _tokens(part) * scale)
    for key in SUMMED_METRICS:  # the objective's terms: the views' token-means summed, as the loss
        if isinstance(metrics.get(key), Metric):
            metrics[key] = Metric(metrics[key].aggregation, sum(per_view[v].get(key, 0.0) for v in VIEW_NAMES))
    for view, values in per_view.items():
        tag = VIEW_TAGS[view]
        metrics.update(
            {f"{name}_{tag}": Metric(AggregationType.SUM, values[k]) for k, name in PER_VIEW_METRICS.items()}
        )
    return total, metrics


def _tokens(data: TensorDict) -> float:
    """The response tokens of ``data`` on this rank (the mask may be a jagged tensor)."""
    mask = data["response_mask"]
    return float((mask.values() if mask.is_nested else mask).sum())


def _per_view(metrics: dict[str, Any], weight: float, token_weight: float) -> dict[str, float]:
    """One view's share of this micro-batch's metrics, each a term of the view's token-mean over the mini-batch.

    The losses are verl's ``sum_{t in v} l_t * dp / N``: times ``N / N_v`` they become the view's. The clip fraction
    and PPO KL are verl's means over this micro-batch's tokens of the view: times the tokens and ``dp / N_v``
    (``token_weight``) they become terms that verl's SUM aggregation (over micro-batches; mean over ranks) adds up to
    the view's token-mean. A loss verl did not compute (``actor/entropy_loss`` at entropy_coeff 0) is left out.
    """
    out = dict.fromkeys(PER_VIEW_METRICS, 0.0)
    for key in {*PER_VIEW_METRICS, *SUMMED_METRICS}:
        metric = metrics.get(key)
        if isinstance(metric, Metric):
            out[key] = float(metric.aggregate()) * (weight if key in SUMMED_METRICS else token_weight)
    return out
