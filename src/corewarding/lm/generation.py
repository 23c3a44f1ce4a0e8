"""Generation backends: n sampled completions per problem, with token counts and finish reasons.

``TransformersGenerator`` batches prompts through ``generate()`` (CPU by default; the tests use the tiny model);
``VLLMGenerator`` runs vLLM's offline engine on a GPU. Both render prompts with the model's own chat template and take
a Hub id, a local folder, or a run's (merged) checkpoint folder.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from omegaconf import DictConfig

from corewarding.backends import GPU_EXTRA, require_backend

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Completion:
    """One sampled response: its text, its length in tokens, and why it ended (``stop`` or ``length``)."""

    text: str
    num_tokens: int
    finish_reason: str

    @property
    def truncated(self) -> bool:
        return self.finish_reason == "length"


@dataclass(frozen=True)
class SamplingSettings:
    """Decoding settings of one benchmark; temperature 0 is greedy (one completion per problem)."""

    n: int
    temperature: float
    top_p: float
    max_new_tokens: int

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


class Generator(Protocol):
    """What the harness needs from a backend."""

    def generate(
        self, conversations: Sequence[list[dict[str, str]]], sampling: SamplingSettings, seed: int
    ) -> list[list[Completion]]:
        """``sampling.n`` completions for each conversation, in order (``seed`` makes the call reproducible)."""
        ...

    def close(self) -> None: ...


class TransformersGenerator:
    """Batched sampling with transformers (the local rollout engine's ``generate``)."""

    def __init__(self, model_path: str, device: str = "cpu", dtype: str = "float32", batch_size: int = 8) -> None:
        import torch
        from transformers import AutoModelForCausalLM

        from corewarding.lm.loading import load_tokenizer

        torch_dtype = getattr(torch, dtype)
        if device == "cpu" and torch_dtype == torch.bfloat16:
            log.warning("bfloat16 on CPU is slow; loading %s in float32", model_path)
            torch_dtype = torch.float32
        self.tokenizer = load_tokenizer(model_path)
        self.model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch_dtype).to(device)  # type: ignore[arg-type]
        self.model.eval()
        self.batch_size = batch_size

    def generate(
        self, conversations: Sequence[list[dict[str, str]]], sampling: SamplingSettings, seed: int
    ) -> list[list[Completion]]:
        import torch

        from corewarding.lm.rollout import Sampling, chat_prompts, generate

        torch.manual_seed(seed)
        settings = Sampling(
            n=sampling.n,
            max_new_tokens=sampling.max_new_tokens,
            temperature=sampling.temperature or 1.0,
            top_p=sampling.top_p,
            greedy=sampling.greedy,
        )
        per_prompt = 1 if sampling.greedy else sampling.n
        out: list[list[Completion]] = []
        for start in range(0, len(conversations), self.batch_size):
            batch = list(conversations[start : start + self.batch_size])
            prompts = chat_prompts(self.tokenizer, batch)
            rollouts = generate(self.model, self.tokenizer, prompts, [""] * len(batch), [None] * len(batch), settings)
            lengths = rollouts.lengths.tolist()
            completions = [
                Completion(text, int(length), "length" if cut else "stop")
                for text, length, cut in zip(rollouts.texts, lengths, rollouts.truncated, strict=True)
            ]
            out += [completions[i : i + per_prompt] for i in range(0, len(completions), per_prompt)]
        return out

    def close(self) -> None:
        del self.model


class VLLMGenerator:
    """vLLM's offline engine (GPU); each problem samples with its own seed, so a resumed chunk repeats exactly."""

    def __init__(self, model_path: str, settings: DictConfig, seed: int) -> None:
        from vllm import LLM

        from corewarding.lm.loading import load_tokenizer

        self.tokenizer = load_tokenizer(model_path)
        self.llm = LLM(
            model=model_path,
            dtype=str(settings.dtype),
            tensor_parallel_size=int(settings.tensor_parallel_size),
            gpu_memory_utilization=float(settings.gpu_memory_utilization),
            max_model_len=settings.max_model_len,
            enforce_eager=bool(settings.enforce_eager),
            seed=seed,
        )

    def generate(
        self, conversations: Sequence[list[dict[str, str]]], sampling: SamplingSettings, seed: int
    ) -> list[list[Completion]]:
        from vllm import SamplingParams

        from corewarding.lm.rollout import chat_prompts

        prompts = chat_prompts(self.tokenizer, list(conversations))
        params = [
            SamplingParams(
                n=1 if sampling.greedy else sampling.n,
                temperature=sampling.temperature,
                top_p=1.0 if sampling.greedy else sampling.top_p,
                max_tokens=sampling.max_new_tokens,
                seed=seed + i,
            )
            for i in range(len(prompts))
        ]
        results = self.llm.generate(prompts, params, use_tqdm=False)
        return [
            [
                Completion(o.text, len(o.token_ids), "length" if o.finish_reason == "length" else "stop")
                for o in r.outputs
            ]
            for r in results
        ]

    def close(self) -> None:
        del self.llm


def load_generator(cfg: DictConfig, model_path: str) -> Any:
    """The backend ``cfg.generation.backend`` names, loaded with ``model_path``."""
    settings = cfg.generation
    if settings.backend == "transformers":
        return TransformersGenerator(model_path, str(settings.device), str(settings.dtype), int(settings.batch_size))
    if settings.backend == "vllm":
        require_backend("generation=vllm", modules=("vllm",), gpu=True, hint=f"{GPU_EXTRA}, or generation=transformers")
        return VLLMGenerator(model_path, settings, int(cfg.seed))
    raise ValueError(f"generation.backend={settings.backend!r}; expected transformers or vllm")
