"""Benchmarks through lm-evaluation-harness's Python API (``lm_eval.simple_evaluate``), read from their YAML.

A benchmark's ``configs/benchmark/<name>.yaml`` names the lm-eval ``task`` and, in its ``lm_eval`` section, how to
read the result, as lm-eval's own task YAML names them: ``filter``, ``metrics`` (our name: lm-eval's metric),
``mean_as`` (also report their mean), ``modules`` (what the task imports) and ``task_yaml`` (lm-eval's task file,
for ``options.data_files``). A new lm-eval benchmark is such a file; nothing here names one.

Read from lm-eval 0.4.13 (the version the ``eval`` extra pins): ``lm_eval/evaluator.py`` (``simple_evaluate``
arguments and the result dict), ``lm_eval/evaluator_utils.py`` (per-task keys ``"<metric>,<filter>"`` and
``"<metric>_stderr,<filter>"``, ``"n-samples"``), ``lm_eval/api/group.py`` (group aggregates),
``lm_eval/tasks/ifeval/ifeval.yaml`` and ``lm_eval/tasks/mmlu_pro/_mmlu_pro.yaml`` (task names, metrics, filters).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from corewarding.evaluation.external.common import (
    EVAL_EXTRA,
    ExternalResult,
    RunSettings,
    distribution_version,
    fraction,
    module_missing,
    write_json_atomic,
)
from corewarding.evaluation.external.registry import ExternalBenchmark, ExternalTool, external_benchmark
from corewarding.lm.generation import SamplingSettings
from corewarding.rows import SYSTEM_PROMPT

logger = logging.getLogger(__name__)

TOOL = "lm_eval"
BACKENDS = ("vllm", "hf")


@dataclass(frozen=True)
class LmEvalTask:
    """A benchmark's lm-eval task and how to read its result, from the benchmark's YAML."""

    benchmark: str
    task: str  # lm-eval's task (or group) name
    metrics: dict[str, str]  # our metric name -> lm-eval's metric, read under ``filter``
    filter: str = "none"  # lm-eval's filter ("none": the unfiltered output)
    mean_as: str | None = None  # also report the mean of ``metrics`` under this name
    modules: tuple[str, ...] = ()  # what the task imports beyond lm-eval (IFEval's checkers)
    task_yaml: str | None = None  # lm-eval's own task file, relative to lm_eval/tasks

    @classmethod
    def of(cls, benchmark: ExternalBenchmark) -> LmEvalTask:
        """The task a benchmark's config declares (its ``task`` and ``lm_eval`` section)."""
        if benchmark.tool != TOOL:
            raise ValueError(f"{benchmark.name!r} is not an lm-eval benchmark (its tool: {benchmark.tool})")
        section = dict(benchmark.spec.get("lm_eval") or {})
        metrics = section.get("metrics")
        if not isinstance(metrics, Mapping) or not metrics:
            raise ValueError(f"{benchmark.name}: benchmark.lm_eval.metrics must map our metric names to lm-eval's")
        return cls(
            benchmark=benchmark.name, task=benchmark.task, metrics={str(k): str(v) for k, v in metrics.items()},
            filter=str(section.get("filter", "none")), mean_as=section.get("mean_as"),
            modules=tuple(section.get("modules") or ()), task_yaml=section.get("task_yaml"),
        )  # fmt: skip


def lm_eval_task(name: str) -> LmEvalTask:
    """The lm-eval task of ``configs/benchmark/<name>.yaml``."""
    return LmEvalTask.of(external_benchmark(name))


def _check_backend(backend: str) -> None:
    if backend not in BACKENDS:
        raise ValueError(f"unknown lm-eval backend {backend!r}; known: {', '.join(BACKENDS)}")


def lm_eval_missing(task: LmEvalTask, backend: str = "vllm") -> str | None:
    """None when lm-eval (and what ``task``/``backend`` need) is importable, else the skip message."""
    _check_backend(backend)
    absent = module_missing("lm_eval", *task.modules)
    if absent:
        return (
            f"{task.benchmark} skipped: lm-eval (lm-evaluation-harness, PyPI 'lm-eval==0.4.13') is not installed "
            f"(missing modules: {', '.join(absent)}); install it with {EVAL_EXTRA}"
        )
    if backend == "vllm" and module_missing("vllm"):
        return (
            f"{task.benchmark} skipped: the vllm backend needs vllm (pip install 'corewarding[gpu,eval]' on a GPU "
            f"machine); backend='hf' runs on CPU"
        )
    return None


def _model_args(model: str, backend: str, seed: int, options: Mapping[str, Any]) -> dict[str, Any]:
    """lm-eval's ``model_args`` for the vllm (``VLLM``) or hf (``HFLM``) model class."""
    args: dict[str, Any] = {"pretrained": model, "dtype": options.get("dtype", "auto")}
    if backend == "vllm":
        args["seed"] = seed  # vllm's own sampling seed (VLLM.__init__ seed=1234 otherwise)
        args["tensor_parallel_size"] = int(options.get("tensor_parallel_size", 1))
        args["gpu_memory_utilization"] = float(options.get("gpu_memory_utilization", 0.9))
        if options.get("max_model_len") is not None:
            args["max_model_len"] = int(options["max_model_len"])
    args.update(dict(options.get("model_args", {})))
    return args


def _local_task(task: LmEvalTask, data_files: str) -> dict[str, Any]:
    """lm-eval's own config of ``task`` (its ``task_yaml``) with its data read from a local JSON/JSONL copy."""
    if task.task_yaml is None:
        raise ValueError(f"options.data_files needs benchmark.lm_eval.task_yaml, which {task.benchmark} does not set")
    import lm_eval.tasks  # lm_eval: imported when used
    from lm_eval.tasks._yaml_loader import load_yaml  # lm_eval: imported when used

    cfg = load_yaml(Path(lm_eval.tasks.__file__).parent / task.task_yaml, resolve_func=True)
    cfg.update(dataset_path="json", dataset_name=None, dataset_kwargs={"data_files": {"train": str(data_files)}})
    return cfg


def build_lm_eval_call(
    task: LmEvalTask, model: str, sampling: SamplingSettings, settings: RunSettings
) -> dict[str, Any]:
    """Keyword arguments for ``lm_eval.simple_evaluate`` (pure: nothing is imported or run).

    ``settings.system_prompt=None`` means the training system prompt (the paper's protocol); ``""`` means none.
    ``settings.options``: dtype, batch_size, device, num_fewshot, apply_chat_template (default True), model_args
    (merged last), tensor_parallel_size / gpu_memory_utilization / max_model_len (vllm), bootstrap_iters.
    ``options['data_files']`` is only used by ``LmEval.run`` (a local copy of the task's data).
    """
    backend, seed, opts = settings.backend, settings.seed, dict(settings.options)
    _check_backend(backend)
    system = SYSTEM_PROMPT if settings.system_prompt is None else settings.system_prompt
    # normalize_gen_kwargs (lm_eval/models/utils.py) forces temperature 0 when do_sample is False.
    gen_kwargs = {
        "do_sample": sampling.temperature > 0,
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "max_gen_toks": sampling.max_new_tokens,
    }
    return {
        "model": backend,
        "model_args": _model_args(model, backend, seed, opts),
        "tasks": [task.task],
        "num_fewshot": opts.get("num_fewshot"),  # None: the task's own (IFEval 0, MMLU-Pro 5)
        "batch_size": opts.get("batch_size", "auto" if backend == "vllm" else 1),
        "device": opts.get("device"),
        "limit": settings.limit,
        "gen_kwargs": gen_kwargs,
        "apply_chat_template": bool(opts.get("apply_chat_template", True)),
        "system_instruction": system or None,
        "random_seed": seed,
        "numpy_random_seed": seed,
        "torch_random_seed": seed,
        "fewshot_random_seed": seed,
        "bootstrap_iters": int(opts.get("bootstrap_iters", 100000)),
        "log_samples": True,
    }


def parse_lm_eval_results(
    task: LmEvalTask, results: Mapping[str, Any]
) -> tuple[dict[str, float], dict[str, float], int]:
    """(metrics, stderr, num_problems) from ``simple_evaluate``'s result dict, read as ``task`` declares.

    Each metric is ``results[task]["<lm-eval metric>,<filter>"]`` (a group's is its size-weighted aggregate); the
    number of problems sums the ``n-samples`` of the task's leaves (a group's subtasks, else the task itself).
    """
    per_task = results.get("results")
    if not isinstance(per_task, Mapping):
        raise ValueError("lm-eval results: no 'results' mapping")
    name, filt = task.task, task.filter
    if name not in per_task:
        raise ValueError(f"lm-eval results: no entry for task {name!r} (found: {', '.join(per_task)})")
    row = per_task[name]
    metrics: dict[str, float] = {}
    stderr: dict[str, float] = {}
    for ours, theirs in task.metrics.items():
        key = f"{theirs},{filt}"
        if key not in row:
            raise ValueError(f"lm-eval results[{name!r}]: no key {key!r} (found: {', '.join(row)})")
        metrics[ours] = fraction(row[key], f"lm-eval results[{name!r}][{key!r}]")
        err = row.get(f"{theirs}_stderr,{filt}")
        if isinstance(err, int | float):  # "N/A" where the tool computes none (IFEval's instruction-level metrics)
            stderr[ours] = float(err)
    if task.mean_as:
        metrics[task.mean_as] = sum(metrics[m] for m in task.metrics) / len(task.metrics)
    leaves = list(results.get("group_subtasks", {}).get(name) or [name])
    counts = results.get("n-samples", {})
    missing = [leaf for leaf in leaves if leaf not in counts]
    if missing:
        raise ValueError(f"lm-eval results: no 'n-samples' count for {', '.join(missing)}")
    return metrics, stderr, sum(int(counts[leaf]["effective"]) for leaf in leaves)


class LmEval(ExternalTool):
    """lm-evaluation-harness, with its vllm or hf (transformers) backend."""

    name = TOOL
    backends = BACKENDS

    def missing(self, benchmark: ExternalBenchmark, settings: RunSettings) -> str | None:
        return lm_eval_missing(LmEvalTask.of(benchmark), settings.backend)

    def run(
        self, benchmark: ExternalBenchmark, model: str, out_dir: Path, sampling: SamplingSettings, settings: RunSettings
    ) -> ExternalResult:
        """Run the benchmark's task through lm-eval, save its full output under ``out_dir``, parse the result."""
        task = LmEvalTask.of(benchmark)
        import lm_eval  # lm_eval: imported when used

        call = build_lm_eval_call(task, model, sampling, settings)
        data_files = settings.options.get("data_files")
        if data_files:
            call["tasks"] = [_local_task(task, data_files)]
        logger.info("lm-eval %s: model %s, backend %s, gen_kwargs %s", task.benchmark, model, call["model"],
                    call["gen_kwargs"])  # fmt: skip
        results = lm_eval.simple_evaluate(**call)
        if results is None:  # only rank 0 returns results (lm_eval/evaluator.py)
            raise RuntimeError("lm_eval.simple_evaluate returned no results (not rank 0?)")
        samples = results.pop("samples", None)
        if samples is not None:
            write_json_atomic(out_dir / f"lm_eval_{task.benchmark}_samples.json", samples)
        raw_path = write_json_atomic(out_dir / f"lm_eval_{task.benchmark}_results.json", results)
        metrics, stderr, num_problems = parse_lm_eval_results(task, results)
        return ExternalResult(
            benchmark=task.benchmark,
            tool=TOOL,
            tool_version=distribution_version("lm_eval"),
            metrics=metrics,
            stderr=stderr,
            num_problems=num_problems,
            raw_path=raw_path,
        )
