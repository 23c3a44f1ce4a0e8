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
from verl.utils.metric import Metric
from verl.workers.utils.losses import ppo_loss

from corewarding.methods.base import VIEW_TAGS

VIEW_ID_KEY = "cr_view_id"  # per row: index into the views present in the batch
VIEW_WEIGHT_KEY = "cr_view_weight"  # per row: N / N_v of the row's view, over the whole batch
VIEW_EXTRA_KEY = "cr_view"  # extra_info key naming a row's view (set by the data preparation)
VIEW_NAMES = ("original", "rephrased")  # the two views of a pair cell, in a fixed order on every rank
SWITCH_KEY = "corewarding_view_sum_loss"  # actor_rollout_ref key, true for pair (two-view) cells; else verl's mean


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

    The metrics are verl's, over all rows (the logged ``actor/pg_loss`` stays verl's single token-mean), plus each
    view's ``actor/{pg_loss,kl_loss,pg_clipfrac,ppo_kl}_{ori,aug}`` (the losses as that view's token-means).
    """
    _, metrics = ppo_loss(config, model_output, data, dp_group)
    if VIEW_ID_KEY not in data.keys():  # noqa: SIM118  (TensorDict refuses `in`)
        raise KeyError(f"{VIEW_ID_KEY} is missing: tag_views was not run on this batch")
    view_ids, weights, mask = data[VIEW_ID_KEY], data[VIEW_WEIGHT_KEY], data["response_mask"]
    total = torch.zeros((), device=mask.device)
    for view in view_ids.unique().tolist():  # the views with rows in this micro-batch
        rows = view_ids == view
        part = data.copy()
        part["response_mask"] = mask * rows.to(mask.dtype).unsqueeze(-1)
        loss, part_metrics = ppo_loss(config, model_output, part, dp_group)
        weight = weights[rows][0]
        total = total + loss * weight
        metrics.update(_per_view(part_metrics, float(weight), VIEW_TAGS[VIEW_NAMES[view]]))
    return total, metrics


def _per_view(metrics: dict[str, Any], weight: float, tag: str) -> dict[str, Metric]:
    """One view's metrics under ``<name>_<tag>``: the losses rescaled from the batch's token count to the view's (as
    the loss itself), the clip fraction and PPO KL as they are (verl takes them as means over the view's mask)."""
    out: dict[str, Metric] = {}
    for key, name, scale in (
        ("actor/pg_loss", "actor/pg_loss", weight),
        ("kl_loss", "actor/kl_loss", weight),
        ("actor/pg_clipfrac", "actor/pg_clipfrac", 1.0),
        ("actor/ppo_kl", "actor/ppo_kl", 1.0),
    ):
        metric = metrics.get(key)
        if isinstance(metric, Metric):
            scaled = Metric(metric.aggregation)
            scaled.extend([value * scale for value in metric.values])
            out[f"{name}_{tag}"] = scaled
    return out
