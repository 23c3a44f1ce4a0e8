"""The e2e's own recomputation of what verl's run scored, written independently of the code under test: a model
rebuilt from a save's per-rank shards, its per-token log-probs, Self-Certainty and entropy from methods.md's
formulas (not ``corewarding.methods``)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModelForCausalLM, PreTrainedModel


def full_state(rank_files: list[Path]) -> dict[str, torch.Tensor]:
    """One state dict from the ranks' FSDP2 shards (dim-0 pieces, in rank order), in fp32."""
    states = [torch.load(path, map_location="cpu", weights_only=False) for path in rank_files]
    local = [{k: (v.to_local() if hasattr(v, "to_local") else v).float() for k, v in s.items()} for s in states]
    return {name: torch.cat([part[name] for part in local], dim=0) for name in local[0]}


def model_with(model_dir: Path, state: Mapping[str, torch.Tensor] | None = None) -> PreTrainedModel:
    """The model of ``model_dir`` (a Hugging Face folder) in fp32, with ``state``'s weights when given."""
    if state is None:
        model = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32)
    else:
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(model_dir), torch_dtype=torch.float32)
        missing, unexpected = model.load_state_dict(dict(state), strict=False)
        tied = {"lm_head.weight"} if model.config.tie_word_embeddings else set()
        assert set(missing) <= tied and not unexpected, (missing, unexpected)
    return model.eval()


@torch.no_grad()
def response_logits(model: PreTrainedModel, prompt_ids: list[int], response_ids: list[int]) -> torch.Tensor:
    """The logits that predict each response token, shape (len(response_ids), V), fp32, one unpadded sequence."""
    ids = torch.tensor([prompt_ids + response_ids])
    logits = model(input_ids=ids, use_cache=False).logits[0].float()
    return logits[len(prompt_ids) - 1 : len(prompt_ids) + len(response_ids) - 1]


def token_log_probs(logits: torch.Tensor, response_ids: list[int]) -> torch.Tensor:
    return torch.log_softmax(logits, dim=-1).gather(-1, torch.tensor(response_ids)[:, None])[:, 0]


def self_certainty_reward(logits: torch.Tensor, temperature: float) -> float:
    """methods.md 1.5: the mean over response tokens of logsumexp(z) - mean_j z_j, z the temperature-scaled logits."""
    z = logits / temperature
    return float((torch.logsumexp(z, dim=-1) - z.mean(dim=-1)).mean())


def negative_entropy_reward(logits: torch.Tensor, temperature: float) -> float:
    """methods.md 1.6: -(1/|y|) sum_t H(p_t), H = logsumexp(z) - sum_j p_j z_j."""
    z = logits / temperature
    entropy = torch.logsumexp(z, dim=-1) - (torch.softmax(z, dim=-1) * z).sum(dim=-1)
    return -float(entropy.mean())


def mean_abs(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().mean()) if len(a) else math.nan
