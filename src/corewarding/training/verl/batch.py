"""verl ``DataProto`` rows <-> the local backend's ``RolloutBatch``: how verl batches reach the method cores.

A row's view (``cr_view``: original | rephrased | teacher) and the key its votes group by (``cr_group``) travel as
non-tensor columns; without them a row is an ``original`` rollout grouped by its verl ``uid``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from transformers import PreTrainedTokenizerBase
from verl import DataProto
from verl.protocol import union_numpy_dict

from corewarding.lm.rollout import RolloutBatch

VIEW_KEY = "cr_view"
GROUP_KEY = "cr_group"
STAT_KEY = "cr_token_stat"


def response_mask_of(data: DataProto) -> torch.Tensor:
    """The response mask: ``response_mask`` when present, else the response part of the attention mask (verl)."""
    if "response_mask" in data.batch:
        return data.batch["response_mask"]
    width = data.batch["responses"].shape[1]
    return data.batch["attention_mask"][:, -width:]


def ground_truth_of(reward_model: Any) -> str | None:
    """The ground truth of a verl ``reward_model`` cell; None when absent."""
    if not isinstance(reward_model, dict):
        return None
    truth = reward_model.get("ground_truth")
    return None if truth is None else str(truth)


def decode_responses(tokenizer: PreTrainedTokenizerBase, responses: torch.Tensor, mask: torch.Tensor) -> list[str]:
    """Decode each row's valid response tokens, special tokens skipped (as the local backend decodes)."""
    rows = [ids[m.bool()].tolist() for ids, m in zip(responses, mask, strict=True)]
    return list(tokenizer.batch_decode(rows, skip_special_tokens=True))


def column(data: DataProto, key: str, default: Sequence[Any] | np.ndarray) -> np.ndarray:
    """A non-tensor column, or ``default`` when the batch has none."""
    if key in data.non_tensor_batch:
        return np.asarray(data.non_tensor_batch[key], dtype=object)
    return np.asarray(list(default), dtype=object)


def view_batches(
    data: DataProto, tokenizer: PreTrainedTokenizerBase, statistic: str | None = None
) -> tuple[dict[str, RolloutBatch], dict[str, np.ndarray]]:
    """Split rows by view, keeping their order; return one RolloutBatch per view and each view's row indices.

    ``statistic`` names the per-token logits statistic carried in ``cr_token_stat`` (the method's
    ``logits_statistic``, ``methods.logits_statistics``); each batch holds it under that name in ``stats``.
    """
    n = len(data)
    uids = column(data, "uid", [str(i) for i in range(n)])
    views = column(data, VIEW_KEY, ["original"] * n)
    groups = column(data, GROUP_KEY, uids)
    truths = [ground_truth_of(rm) for rm in column(data, "reward_model", [None] * n)]
    responses = data.batch["responses"]
    mask = response_mask_of(data).long()
    prompts = data.batch["prompts"]
    prompt_mask = data.batch["attention_mask"][:, : prompts.shape[1]]
    texts = decode_responses(tokenizer, responses, mask)
    stat = data.batch[STAT_KEY] if statistic and STAT_KEY in data.batch else None
    batches: dict[str, RolloutBatch] = {}
    rows: dict[str, np.ndarray] = {}
    for view in dict.fromkeys(views.tolist()):
        idx = np.nonzero(views == view)[0]
        t = torch.as_tensor(idx, dtype=torch.long)
        batches[view] = RolloutBatch(
            view=str(view),
            uids=[str(groups[i]) for i in idx],
            ground_truths=[truths[i] for i in idx],
            prompt_ids=prompts[t],
            prompt_mask=prompt_mask[t],
            response_ids=responses[t],
            response_mask=mask[t],
            texts=[texts[i] for i in idx],
            truncated=[bool(mask[i].sum() == mask.shape[1]) for i in idx],
            stats={} if stat is None or statistic is None else {statistic: stat[t]},
        )
        rows[str(view)] = idx
    return batches, rows


def token_level(sequence_rewards: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """Place each sequence's reward on its last valid response token (verl's outcome-reward layout).

    >>> token_level(torch.tensor([1.0, 2.0]), torch.tensor([[1, 1, 0], [0, 0, 0]]))
    tensor([[0., 1., 0.],
            [2., 0., 0.]])
    """
    out = torch.zeros(response_mask.shape, dtype=torch.float32)
    last = (response_mask.long().sum(-1) - 1).clamp(min=0)
    out[torch.arange(out.shape[0]), last] = sequence_rewards.float()
    return out


def same_value(a: Any, b: Any) -> bool:
    """Equal as verl's ``union_numpy_dict`` compares cells (``protocol._deep_equal``): same type, a float NaN equal
    to a NaN, arrays element by element (dtype and shape first), anything else by ``==``."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, np.ndarray):
        if a.dtype != b.dtype or a.shape != b.shape:
            return False
        if a.dtype != object:
            return bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))
        return all(map(same_value, a.flat, b.flat))
    try:
        return bool(a == b)
    except (TypeError, ValueError):  # e.g. dicts holding arrays: verl's assert fails on them too
        return False


def column_conflict(key: str, returned: np.ndarray, ours: np.ndarray) -> str | None:
    """Why a non-tensor column verl returned differs from ours (its first differing row), or None when equal."""
    if returned.shape != ours.shape or returned.dtype != ours.dtype:
        return (
            f"column {key!r}: verl's agent loop returned shape {returned.shape} and dtype {returned.dtype}, "
            f"the dataset's has {ours.shape} and {ours.dtype}"
        )
    for row, (theirs, mine) in enumerate(zip(returned.flat, ours.flat, strict=True)):
        if not same_value(theirs, mine):
            return (
                f"column {key!r} differs at row {row}: verl's agent loop returned {theirs!r}, the dataset has {mine!r}"
            )
    return None


def union_columns(returned: dict[str, np.ndarray], ours: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """verl's ``union_numpy_dict(returned, ours)`` (``DataProto.union``'s, for non-tensor columns); a column both
    hold with different contents is a ValueError naming it and its first differing row, where verl's own check is
    an ``assert`` (gone under ``python -O``)."""
    for key, column in ours.items():
        if key in returned:
            problem = column_conflict(key, np.asarray(returned[key]), np.asarray(column))
            if problem is not None:
                raise ValueError(problem)
    return union_numpy_dict(returned, ours)
