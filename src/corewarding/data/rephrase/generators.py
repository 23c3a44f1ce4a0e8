"""Text generators for rephrasing: transformers (CPU or GPU, any local model) and vLLM (GPU)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Protocol

from omegaconf import DictConfig

from corewarding.backends import GPU_EXTRA, require_backend

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Generation:
    """One sampled reply; ``finish`` is stop, length, or prompt_too_long (nothing generated)."""

    text: str
    finish: str


class Generator(Protocol):
    """Generates one reply per conversation; ``seeds`` gives one seed per conversation."""

    def generate(self, conversations: list[list[dict[str, str]]], seeds: list[int]) -> list[Generation]: ...


def _render(tokenizer: Any, conversation: list[dict[str, str]], enable_thinking: bool) -> str:
    return str(
        tokenizer.apply_chat_template(
            conversation, tokenize=False, add_generation_prompt=True, enable_thinking=enable_thinking
        )
    )


class TransformersGenerator:
    """Batched sampling with transformers; one torch seed per batch (the first conversation's seed)."""

    def __init__(self, source: str, spec: DictConfig, device: str = "cpu") -> None:
        import torch
        from transformers import AutoModelForCausalLM

        from corewarding.lm.loading import load_tokenizer

        self.torch = torch
        self.spec = spec
        self.device = device
        self.tokenizer = load_tokenizer(source)  # left-padded, with a pad token
        model: Any = AutoModelForCausalLM.from_pretrained(source)
        self.model = model.to(device).eval()
        self.context = int(getattr(self.model.config, "max_position_embeddings", 1 << 30))

    def generate(self, conversations: list[list[dict[str, str]]], seeds: list[int]) -> list[Generation]:
        """Sample a reply per conversation; prompts that leave no room in the context are not generated."""
        texts = [_render(self.tokenizer, c, bool(self.spec.enable_thinking)) for c in conversations]
        lengths = [len(ids) for ids in self.tokenizer(texts, add_special_tokens=False)["input_ids"]]
        fits = [i for i, n in enumerate(lengths) if n < self.context]
        results = [Generation("", "prompt_too_long")] * len(texts)
        if not fits:
            return results
        room = self.context - max(lengths[i] for i in fits)
        max_new = min(int(self.spec.max_new_tokens), room)
        batch = self.tokenizer([texts[i] for i in fits], return_tensors="pt", padding=True, add_special_tokens=False)
        self.torch.manual_seed(seeds[0])
        with self.torch.no_grad():
            out = self.model.generate(
                **batch.to(self.device),
                do_sample=True,
                temperature=float(self.spec.temperature),
                top_p=float(self.spec.top_p),
                top_k=0,
                max_new_tokens=max_new,
                pad_token_id=self.tokenizer.pad_token_id,
            )
        new_tokens = out[:, batch["input_ids"].shape[1] :]
        for i, ids in zip(fits, new_tokens, strict=True):
            ended = bool((ids == self.tokenizer.eos_token_id).any())
            text = str(self.tokenizer.decode(ids, skip_special_tokens=True))
            results[i] = Generation(text, "stop" if ended else "length")
        return results


class VLLMGenerator:
    """vLLM offline generation, one SamplingParams (with its own seed) per conversation."""

    def __init__(self, source: str, spec: DictConfig) -> None:
        from vllm import LLM  # GPU only; imported here so CPU installs never need vllm

        self.spec = spec
        self.llm = LLM(
            model=source,
            tensor_parallel_size=int(spec.vllm.tensor_parallel_size),
            dtype=str(spec.vllm.dtype),
            gpu_memory_utilization=float(spec.vllm.gpu_memory_utilization),
            max_model_len=int(spec.vllm.max_model_len),
            seed=int(spec.seed),
        )
        self.tokenizer = self.llm.get_tokenizer()

    def generate(self, conversations: list[list[dict[str, str]]], seeds: list[int]) -> list[Generation]:
        """Generate the whole batch in one call."""
        from vllm import SamplingParams

        prompts = [_render(self.tokenizer, c, bool(self.spec.enable_thinking)) for c in conversations]
        params = [
            SamplingParams(
                temperature=float(self.spec.temperature),
                top_p=float(self.spec.top_p),
                max_tokens=int(self.spec.max_new_tokens),
                seed=seed,
            )
            for seed in seeds
        ]
        outputs = self.llm.generate(prompts, sampling_params=params)
        return [Generation(o.outputs[0].text, str(o.outputs[0].finish_reason)) for o in outputs]


def check_backend(spec: DictConfig) -> None:
    """Refuse a ``rephrase.backend`` that cannot run here (vllm: not installed, or no GPU) with one clear error."""
    if spec.backend == "vllm":
        require_backend(
            "rephrase.backend=vllm", modules=("vllm",), gpu=True, hint=f"{GPU_EXTRA}, or rephrase=transformers_tiny"
        )


def make_generator(spec: DictConfig, source: str) -> Generator:
    """The generator ``rephrase.backend`` names, once check_backend passes."""
    check_backend(spec)
    if spec.backend == "transformers":
        return TransformersGenerator(source, spec)
    if spec.backend == "vllm":
        return VLLMGenerator(source, spec)
    raise ValueError(f"rephrase.backend={spec.backend!r}: expected transformers or vllm")
