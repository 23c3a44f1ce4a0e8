"""The trainer's reward step on plain verl batches (no workers): what runs between rollout and verl's reward read.

``manager_input`` turns the post-rollout training batch (in verl's length-balanced order), the teacher's rollouts
and a per-token statistic into the batch a ``corewarding_<method>`` manager scores: rows in rollout order (so
vote ties break as in the local backend), tagged with view and vote group. ``rm_scores_for`` maps the manager's
token rewards back to the training batch's order.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from tensordict import TensorDict
from verl import DataProto

from corewarding.grading.answers import extract_boxed_answer
from corewarding.methods.base import VIEW_TAGS
from corewarding.training.verl.batch import GROUP_KEY, STAT_KEY, VIEW_KEY, column, response_mask_of

ROW_KEY = "cr_row"  # position of a row in the rollout batch, before verl reorders it for load balance
PAIR_KEY, VIEW_EXTRA_KEY = "cr_pair", "cr_view"
ROLLOUT_LOG_PROBS = "rollout_log_probs"  # verl's key for vLLM's log-prob of each sampled token


def _extra(data: DataProto, key: str, default: Any) -> list[Any]:
    extras = column(data, "extra_info", [{}] * len(data))
    return [e.get(key, default) if isinstance(e, dict) else default for e in extras]


def _part(
    data: DataProto, order: np.ndarray, views: list[str], groups: list[str], stat: torch.Tensor | None
) -> DataProto:
    idx = torch.as_tensor(order, dtype=torch.long)
    tensors = {
        "prompts": data.batch["prompts"][idx],
        "responses": data.batch["responses"][idx],
        "attention_mask": data.batch["attention_mask"][idx],
        "response_mask": response_mask_of(data)[idx],
    }
    if stat is not None:
        tensors[STAT_KEY] = stat[idx].float()
    sampled = data.batch.get(ROLLOUT_LOG_PROBS, None)  # vLLM's log-prob of each sampled token (calculate_log_probs)
    if sampled is not None:
        tensors[ROLLOUT_LOG_PROBS] = sampled[idx].float()
    non_tensor = {
        "uid": column(data, "uid", [str(i) for i in range(len(data))])[order],
        "reward_model": column(data, "reward_model", [None] * len(data))[order],
        VIEW_KEY: np.asarray([views[i] for i in order], dtype=object),
        GROUP_KEY: np.asarray([groups[i] for i in order], dtype=object),
    }
    return DataProto(batch=TensorDict(tensors, batch_size=len(order)), non_tensor_batch=non_tensor)


def _vote_groups(data: DataProto, pairs: bool, what: str = "rollouts") -> list[str]:
    """Each row's vote group: its verl uid, or with ``pairs`` its question (``extra_info.cr_pair``). Rows without
    a uid are an error: a stand-in per row would give every row a group of its own, so no vote would ever join
    (Co-rewarding-II's teacher rows lose theirs in verl's agent loop until ``union_columns`` puts them back)."""
    if not pairs:
        if "uid" not in data.non_tensor_batch:
            raise ValueError(f"the {what} have no uid column, so their votes cannot join their question's group")
        return [str(u) for u in data.non_tensor_batch["uid"]]
    questions = _extra(data, PAIR_KEY, None)
    if any(p is None for p in questions):
        raise ValueError("paired rows need extra_info.cr_pair (prepare the data with corewarding)")
    return [f"pair-{p}" for p in questions]


def manager_input(
    batch: DataProto,
    teacher: DataProto | None = None,
    stat: torch.Tensor | None = None,
    pairs: bool = False,
    teacher_per_view: bool = False,
) -> tuple[DataProto, np.ndarray]:
    """The manager's batch (training rows in rollout order, then teacher rows) and the training rows' order.

    Votes group by the verl uid, or for paired methods (Co-rewarding-I and III) by the question
    (``extra_info.cr_pair``), whose two views carry different uids so that GRPO stays within each view. Teacher rows
    are view ``teacher`` (Co-rewarding-II), or with ``teacher_per_view`` ``teacher_<view>`` after the view of the
    prompt they answer (Co-rewarding-III).
    """
    n = len(batch)
    rows = np.asarray([int(r) for r in column(batch, ROW_KEY, list(range(n)))], dtype=np.int64)
    order = np.argsort(rows, kind="stable")
    views = [str(v) for v in _extra(batch, VIEW_EXTRA_KEY, "original")]
    parts = [_part(batch, order, views, _vote_groups(batch, pairs), stat)]
    if teacher is not None:
        t_views = ["teacher"] * len(teacher)
        if teacher_per_view:
            t_views = [f"teacher_{v}" for v in _extra(teacher, VIEW_EXTRA_KEY, "original")]
        t_groups = _vote_groups(teacher, pairs, "teacher's rollouts")
        parts.append(_part(teacher, np.arange(len(teacher)), t_views, t_groups, None))
        if stat is not None:
            parts[1].batch[STAT_KEY] = torch.zeros_like(parts[1].batch["responses"], dtype=torch.float32)
    return (DataProto.concat(parts) if len(parts) > 1 else parts[0]), order


def reward_rows(data: DataProto, rewards: list[float], rewarded: list[bool], tokenizer: Any) -> list[dict[str, Any]]:
    """What the manager scored, one dict per row of its batch (``manager_input``'s order): view, vote group, the
    decoded prompt and response, the response's extracted answer (what votes compare), and the reward.
    ``verl.reward_dump`` writes them per step, so a reward can be traced to the rollouts that voted for its label
    (``docs/training.md``)."""
    mask = response_mask_of(data)
    prompts, responses = data.batch["prompts"], data.batch["responses"]
    prompt_mask = data.batch["attention_mask"][:, : prompts.shape[1]].bool()
    out = []
    sampled = data.batch.get(ROLLOUT_LOG_PROBS, None)
    for i in range(len(data)):
        prompt_ids = prompts[i][prompt_mask[i]].tolist()
        response_ids = responses[i][mask[i].bool()].tolist()
        response = tokenizer.decode(response_ids, skip_special_tokens=True)
        row = {
            "view": str(data.non_tensor_batch[VIEW_KEY][i]),
            "group": str(data.non_tensor_batch[GROUP_KEY][i]),
            "prompt": tokenizer.decode(prompt_ids, skip_special_tokens=True),
            "response": response,
            "answer": extract_boxed_answer(response),
            "reward": float(rewards[i]),
            "rewarded": bool(rewarded[i]),
            "prompt_ids": prompt_ids,  # the tokens as scored, so a test can recompute a row's logits
            "response_ids": response_ids,
        }
        if sampled is not None:
            row[ROLLOUT_LOG_PROBS] = sampled[i][mask[i].bool()].tolist()
        out.append(row)
    return out


def rm_scores_for(reward_tensor: torch.Tensor, order: np.ndarray) -> torch.Tensor:
    """The training rows' token rewards in the training batch's order (the manager saw them in rollout order)."""
    n = len(order)
    out = torch.empty((n, reward_tensor.shape[1]), dtype=torch.float32)
    out[torch.as_tensor(order, dtype=torch.long)] = reward_tensor[:n].float()
    return out


def view_entropy(entropys: torch.Tensor, batch: DataProto) -> dict[str, float]:
    """``actor/entropy_{ori,aug}``: the old policy's token-mean entropy over each view's responses (verl logs one
    ``actor/entropy`` over both)."""
    mask = response_mask_of(batch).float()
    views = np.asarray(_extra(batch, VIEW_EXTRA_KEY, "original"), dtype=object)
    out = {}
    for view, tag in VIEW_TAGS.items():
        rows = torch.as_tensor(views == view)
        tokens = mask[rows].sum()
        if tokens > 0:
            out[f"actor/entropy_{tag}"] = float((entropys[rows].float() * mask[rows]).sum() / tokens)
    return out
