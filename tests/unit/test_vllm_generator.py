"""The vLLM generator's contract without vLLM: what it hands the engine (token ids, one seeded request per
conversation), what it returns, and where it may run (a GPU, or vLLM's CPU build in float32). The engine itself runs
in tests/verl_e2e/test_vllm_generation.py (``make verl-e2e``) and tests/gpu/."""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass, field
from typing import Any

import pytest

from corewarding.extras import BackendUnavailable
from corewarding.lm import generation
from corewarding.lm.generation import SamplingSettings, VLLMGenerator, check_backend, vllm_dtype


class BosTokenizer:
    """Adds a BOS (id 1) unless told not to, as Llama 3's does; its chat template writes its own BOS."""

    def apply_chat_template(self, conversation: list[dict[str, str]], **kwargs: Any) -> str:
        return "<bos>" + "".join(m["content"] for m in conversation) + f"|{sorted(kwargs.items())}"

    def __call__(self, texts: list[str], add_special_tokens: bool = True) -> dict[str, list[list[int]]]:
        ids = [[1, *(2 + ord(c) % 50 for c in text.removeprefix("<bos>"))] for text in texts]
        return {"input_ids": [[1, *row] if add_special_tokens else row for row in ids]}


@dataclass
class Output:
    text: str
    token_ids: list[int]
    finish_reason: str


@dataclass
class Result:
    outputs: list[Output]


@dataclass
class FakeLLM:
    calls: list[tuple[list[Any], list[Any]]] = field(default_factory=list)

    def generate(self, prompts: list[Any], params: list[Any], use_tqdm: bool = True) -> list[Result]:
        self.calls.append((prompts, params))
        return [Result([Output("ok", [7, 8, 0], "stop")] * p.n) for p in params]


class SamplingParams:
    def __init__(self, **kwargs: Any) -> None:
        self.__dict__.update(kwargs)


@pytest.fixture()
def generator(monkeypatch: pytest.MonkeyPatch) -> VLLMGenerator:
    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(SamplingParams=SamplingParams))
    made = VLLMGenerator.__new__(VLLMGenerator)
    made.tokenizer = BosTokenizer()  # type: ignore[assignment]
    made.chat_kwargs = {"enable_thinking": False}
    made.llm = FakeLLM()
    return made


def test_prompts_go_to_vllm_as_the_token_ids_the_transformers_backend_feeds(generator: VLLMGenerator) -> None:
    conversations = [[{"role": "user", "content": "What is 2 + 3?"}], [{"role": "user", "content": "7 - 4?"}]]
    completions = generator.sample(conversations, SamplingSettings(4, 0.7, 0.8, 24), seeds=[11, 12])

    [(prompts, params)] = generator.llm.calls
    rendered = generation.render_prompts(generator.tokenizer, conversations, generator.chat_kwargs)
    expected = generator.tokenizer(rendered, add_special_tokens=False)["input_ids"]
    assert [p["prompt_token_ids"] for p in prompts] == expected
    assert all(ids[0] == 1 and ids[1] != 1 for ids in expected)  # the template's BOS, once
    assert [(p.n, p.temperature, p.top_p, p.max_tokens, p.seed) for p in params] == [
        (4, 0.7, 0.8, 24, 11),
        (4, 0.7, 0.8, 24, 12),
    ]
    assert [len(c) for c in completions] == [4, 4]
    assert completions[0][0] == generation.Completion("ok", 3, "stop", (7, 8, 0))


def test_greedy_asks_one_completion_with_top_p_one(generator: VLLMGenerator) -> None:
    [[completion]] = generator.sample([[{"role": "user", "content": "1 + 1"}]], SamplingSettings(8, 0, 0.8, 5), [0])
    [(_, [params])] = generator.llm.calls
    assert (params.n, params.temperature, params.top_p) == (1, 0, 1.0)
    assert completion.token_ids == (7, 8, 0)


def test_vllm_runs_on_its_cpu_build_in_float32_and_nowhere_else_without_a_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    from corewarding import extras

    monkeypatch.setattr(extras, "module_missing", lambda *modules: [])  # as if vllm were installed
    monkeypatch.setattr(extras, "_cuda_visible", lambda: False)
    monkeypatch.setattr(generation, "vllm_on_cpu", lambda: True)
    check_backend("vllm", "generation=vllm", "generation=transformers")
    assert vllm_dtype("bfloat16") == "float32"

    monkeypatch.setattr(generation, "vllm_on_cpu", lambda: False)  # a GPU build of vllm on a machine without a GPU
    with pytest.raises(BackendUnavailable, match="generation=vllm runs on CUDA GPUs and none is visible"):
        check_backend("vllm", "generation=vllm", "generation=transformers")
    assert vllm_dtype("bfloat16") == "bfloat16"


def test_without_vllm_nothing_of_vllm_is_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    from corewarding import extras

    monkeypatch.setattr(extras, "module_missing", lambda *modules: list(modules))
    monkeypatch.delitem(sys.modules, "vllm", raising=False)
    extras.vllm_on_cpu.cache_clear()
    try:
        assert extras.vllm_on_cpu() is False
        assert "vllm" not in sys.modules
    finally:
        extras.vllm_on_cpu.cache_clear()
