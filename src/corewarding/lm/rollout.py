"""Sample responses with a transformers causal LM and score them token by token (the local rollout engine)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from corewarding.methods.logits_statistics import logits_statistic

NEUTRAL_SAMPLING: dict[str, object] = {
    "num_beams": 1,
    "repetition_penalty": 1.0,
    "no_repeat_ngram_size": 0,
    "min_new_tokens": 0,
    "typical_p": 1.0,
    "min_p": None,  # unset (0.0 is "not a valid flag" to transformers' check, a warning at every generation)
    "epsilon_cutoff": 0.0,
    "eta_cutoff": 0.0,
}


@dataclass(frozen=True)
class Sampling:
    """Decoding settings; ``greedy`` ignores the rest (validation)."""

    n: int
    max_new_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    greedy: bool = False


@dataclass
class RolloutBatch:
    """Prompts (left-padded) and responses (right-padded) of one view; row i belongs to ``uids[i]``."""

    view: str
    uids: list[str]
    ground_truths: list[str | None]
    prompt_ids: torch.Tensor
    prompt_mask: torch.Tensor
    response_ids: torch.Tensor
    response_mask: torch.Tensor
    texts: list[str]
    truncated: list[bool]
    stats: dict[str, torch.Tensor] = field(default_factory=dict)  # per-token tensors filled by score_tokens

    @property
    def lengths(self) -> torch.Tensor:
        return self.response_mask.sum(-1)


def chat_prompts(tokenizer: PreTrainedTokenizerBase, messages: list[list[dict[str, str]]]) -> list[str]:
    """Render chat messages with the tokenizer's chat template and the assistant generation prompt."""
    return [str(tokenizer.apply_chat_template(m, add_generation_prompt=True, tokenize=False)) for m in messages]


def _response_mask(response_ids: torch.Tensor, eos_ids: set[int]) -> tuple[torch.Tensor, list[bool]]:
    """Tokens up to and including the first EOS; a response without EOS is truncated (it hit the cap)."""
    is_eos = torch.zeros_like(response_ids, dtype=torch.bool)
    for eos in eos_ids:
        is_eos |= response_ids == eos
    after_eos = (is_eos.cumsum(-1) - is_eos.long()) > 0
    return (~after_eos).long(), [not bool(row.any()) for row in is_eos]


@torch.no_grad()
def generate(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    prompts: list[str],
    uids: list[str],
    ground_truths: list[str | None],
    sampling: Sampling,
    view: str = "original",
) -> RolloutBatch:
    """``sampling.n`` responses per prompt, interleaved (prompt 0 x n, prompt 1 x n, ...)."""
    enc = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False).to(model.device)
    n = 1 if sampling.greedy else sampling.n
    # Pin every setting that reshapes the sampling distribution: unset ones would come from the model's own
    # generation_config (a repetition_penalty, say) and make the rollouts off-policy for the log-prob pass.
    kwargs: dict[str, object] = {"do_sample": False, **NEUTRAL_SAMPLING}
    if not sampling.greedy:
        kwargs = {
            "do_sample": True,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "top_k": sampling.top_k if sampling.top_k > 0 else 0,
            **NEUTRAL_SAMPLING,
        }
    configured = model.generation_config.eos_token_id
    configured = configured if isinstance(configured, list) else [configured]
    eos_ids = {tokenizer.eos_token_id, *configured} - {None}
    out = model.generate(  # type: ignore[operator]  # the stubs resolve generate through nn.Module.__getattr__
        input_ids=enc["input_ids"],
        attention_mask=enc["attention_mask"],
        max_new_tokens=sampling.max_new_tokens,
        num_return_sequences=n,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=sorted(eos_ids),
        **kwargs,
    )
    prompt_len = enc["input_ids"].shape[1]
    response_ids = out[:, prompt_len:]
    if response_ids.shape[1] == 0:
        response_ids = torch.full((out.shape[0], 1), tokenizer.pad_token_id, device=out.device)
    mask, truncated = _response_mask(response_ids, eos_ids)
    response_ids = torch.where(mask.bool(), response_ids, torch.full_like(response_ids, tokenizer.pad_token_id))
    texts = tokenizer.batch_decode(response_ids, skip_special_tokens=True)
    return RolloutBatch(
        view=view,
        uids=[u for u in uids for _ in range(n)],
        ground_truths=[g for g in ground_truths for _ in range(n)],
        prompt_ids=enc["input_ids"].repeat_interleave(n, 0),
        prompt_mask=enc["attention_mask"].repeat_interleave(n, 0),
        response_ids=response_ids,
        response_mask=mask,
        texts=texts,
        truncated=truncated,
    )


def token_logprobs(
    model: PreTrainedModel,
    batch: RolloutBatch,
    rows: slice | list[int],
    temperature: float = 1.0,
    statistics: Sequence[str] = (),
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Log-probs of the response tokens of ``rows``, and the registered logits ``statistics`` of the same
    temperature-scaled logits per token, by name (``methods.logits_statistics``; computed without gradients).

    Gradients flow through the log-probs when called outside ``torch.no_grad``. Positions follow the attention
    mask, as in generation.
    """

    prompt_ids, response_ids = batch.prompt_ids[rows], batch.response_ids[rows]
    attention = torch.cat([batch.prompt_mask[rows], batch.response_mask[rows]], dim=1)
    input_ids = torch.cat([prompt_ids, response_ids], dim=1)
    position_ids = (attention.cumsum(-1) - 1).clamp(min=0)
    logits = model(input_ids=input_ids, attention_mask=attention, position_ids=position_ids).logits
    p, r = prompt_ids.shape[1], response_ids.shape[1]
    logits = logits[:, p - 1 : p - 1 + r, :].float() / temperature
    logp = torch.log_softmax(logits, dim=-1).gather(-1, response_ids.unsqueeze(-1)).squeeze(-1)
    with torch.no_grad():
        return logp, {name: logits_statistic(name).compute(logits) for name in statistics}
