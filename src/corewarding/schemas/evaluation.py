"""The evaluation root's sections (``configs/eval.yaml``): the benchmark, the generation backend, the math-verify
checker and the bootstrap intervals."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from corewarding.schemas.reading import AT_LEAST_1, DTYPES, WHOLE_OR_NULL, Rule, one_of, setting


@dataclass(frozen=True)
class MathVerifyConfig:
    """``math_verify`` (configs/eval.yaml): the math-verify checker's worker processes."""

    workers: int | None = setting(
        "worker processes (null: one per core)", Rule(lambda v: v >= 1, "an integer >= 1, or null (one per core)")
    )
    timeout_s: float = setting("seconds per comparison before it counts as wrong", Rule(lambda v: v > 0, "> 0"))


@dataclass(frozen=True)
class BootstrapConfig:
    """``bootstrap`` (configs/eval.yaml): the confidence interval of every score."""

    samples: int = setting("resamples of the problems", Rule(lambda v: v >= 0, ">= 0"))
    confidence: float = setting("the interval's coverage", Rule(lambda v: 0 < v < 1, "in (0, 1)"))


@dataclass(frozen=True, kw_only=True)
class LmEvalConfig:
    """``benchmark.lm_eval``: how an lm-evaluation-harness result is read."""

    filter: str = setting("lm-eval's filter name in its result keys", default="none")
    metrics: dict[str, str] = setting("our metric name: lm-eval's")
    mean_as: str | None = setting("also report the metrics' mean under this name", default=None)
    modules: tuple[str, ...] = setting("what the task's checkers import", default=())
    task_yaml: str | None = setting("lm-eval's task file, relative to lm_eval/tasks", default=None)


@dataclass(frozen=True, kw_only=True)
class BenchmarkConfig:
    """``benchmark`` (configs/benchmark/*.yaml): one evaluation set and how it is sampled and scored."""

    name: str = setting("the option's name")
    kind: str = setting("math: prepared rows and our checkers; external: an outside tool", one_of("math", "external"))
    datasource: str | None = setting("configs/datasource option it is prepared from (math)", default=None)
    data_file: str | None = setting("the prepared rows (math)", default=None)
    source_file: str | None = setting("a local copy to prepare from (null: the datasource's)", default=None)
    system_prompt: str | None = setting("training (the prepared rows' system message) or a literal text", default=None)
    answer_field: str | None = setting("the ground truth's dotted column (math)", default=None)
    metrics: tuple[str, ...] = setting("pass@k, avg@k, maj@k (math)", default=())
    tool: str | None = setting("the external tool", one_of("lm_eval", "livecodebench", "zeroeval"), default=None)
    task: str | None = setting("the tool's task name (external)", default=None)
    lm_eval: LmEvalConfig | None = setting("how lm-eval's result is read (tool=lm_eval)", default=None)
    n: int = setting("samples per problem", Rule(lambda v: v >= 1, "an integer >= 1"))
    temperature: float = setting("sampling temperature (0: greedy)", Rule(lambda v: v >= 0, ">= 0 (0: greedy)"))
    top_p: float = setting("nucleus sampling", Rule(lambda v: 0 < v <= 1, "in (0, 1]"))
    max_new_tokens: int = setting("tokens generated at most", Rule(lambda v: v >= 1, ">= 1"))
    limit: int | None = setting("the first N problems only (null: all)", Rule(lambda v: v >= 1, ">= 1 or null"))
    options: dict[str, Any] = setting("passed to the external tool", default={})


@dataclass(frozen=True, kw_only=True)
class GenerationConfig:
    """``generation`` (configs/generation/*.yaml): the evaluation's text-generation backend."""

    backend: str = setting(
        "transformers (CPU/GPU, batched) or vllm (GPU)", one_of("transformers", "vllm", why="transformers or vllm")
    )
    device: str | None = setting("transformers' device: cpu, cuda, cuda:1 (null: vllm's GPU)", default=None)
    dtype: str = setting("weights' dtype", one_of(*DTYPES))
    batch_size: int | None = setting("prompts per generate() call (transformers)", WHOLE_OR_NULL, default=None)
    tensor_parallel_size: int = setting("GPUs per vLLM engine", AT_LEAST_1, default=1)
    gpu_memory_utilization: float | None = setting(
        "vLLM's share of a GPU's memory", Rule(lambda v: 0 < v <= 1, "in (0, 1], or null"), default=None
    )
    max_model_len: int | None = setting("vLLM's context length (null: the model's)", WHOLE_OR_NULL, default=None)
    enforce_eager: bool = setting("vLLM without CUDA graphs", default=False)
