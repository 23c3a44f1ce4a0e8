"""IFEval and MMLU-Pro through lm-evaluation-harness's Python API (``lm_eval.simple_evaluate``).

Read from lm-eval 0.4.13 (the version the ``eval`` extra pins): ``lm_eval/evaluator.py`` (``simple_evaluate``
arguments and the result dict), ``lm_eval/evaluator_utils.py`` (per-task keys ``"<metric>,<filter>"`` and
``"<metric>_stderr,<filter>"``, ``"n-samples"``), ``lm_eval/api/group.py`` (group aggregates),
``lm_eval/tasks/ifeval/ifeval.yaml`` and ``lm_eval/tasks/mmlu_pro/_mmlu_pro.yaml`` (task names, metrics, filters).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from corewarding.evaluation.external.common import (
    EVAL_EXTRA,
    ExternalResult,
    ToolMissing,
    distribution_version,
    fraction,
    module_missing,
    write_json_atomic,
)
from corewarding.rows import SYSTEM_PROMPT

logger = logging.getLogger(__name__)

TASKS = {"ifeval": "ifeval", "mmlu_pro": "mmlu_pro"}
IFEVAL_METRICS = ("prompt_level_strict_acc", "inst_level_strict_acc", "prompt_level_loose_acc", "inst_level_loose_acc")
# The ifeval extra of lm-eval: the instruction checkers import these.
IFEVAL_MODULES = ("langdetect", "immutabledict", "nltk")
BACKENDS = ("vllm", "hf")


def lm_eval_missing(benchmark: str, backend: str = "vllm") -> str | None:
    """None when lm-eval (and what ``benchmark``/``backend`` need) is importable, else the skip message."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown lm-eval backend {backend!r}; known: {', '.join(BACKENDS)}")
    needed = ["lm_eval", *(IFEVAL_MODULES if benchmark == "ifeval" else ())]
    absent = module_missing(*needed)
    if absent:
        return (
            f"{benchmark} skipped: lm-eval (lm-evaluation-harness, PyPI 'lm-eval==0.4.13') is not installed "
            f"(missing modules: {', '.join(absent)}); install it with {EVAL_EXTRA}"
        )
    if backend == "vllm" and module_missing("vllm"):
        return (
            f"{benchmark} skipped: the vllm backend needs vllm (pip install 'corewarding[gpu,eval]' on a GPU "
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


def _ifeval_local_task(data_files: str) -> dict[str, Any]:
    """The registered ``ifeval`` task config with its data read from a local JSON/JSONL copy of google/IFEval."""
    import lm_eval.tasks  # lm_eval: imported when used
    from lm_eval.tasks._yaml_loader import load_yaml  # lm_eval: imported when used

    cfg = load_yaml(Path(lm_eval.tasks.__file__).parent / "ifeval" / "ifeval.yaml", resolve_func=True)
    cfg.update(dataset_path="json", dataset_name=None, dataset_kwargs={"data_files": {"train": str(data_files)}})
    return cfg


def build_lm_eval_call(
    benchmark: str,
    model: str,
    *,
    backend: str = "vllm",
    temperature: float = 0.8,
    top_p: float = 1.0,
    max_new_tokens: int = 3072,
    seed: int = 0,
    limit: int | None = None,
    system_prompt: str | None = None,
    options: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Keyword arguments for ``lm_eval.simple_evaluate`` (pure: nothing is imported or run).

    ``system_prompt=None`` means the training system prompt (the paper's protocol); ``""`` means none.
    ``options``: dtype, batch_size, device, num_fewshot, apply_chat_template (default True), model_args (merged
    last), tensor_parallel_size / gpu_memory_utilization / max_model_len (vllm), bootstrap_iters.
    ``options['data_files']`` is only used by :func:`run_lm_eval` (a local copy of IFEval's data).
    """
    if benchmark not in TASKS:
        raise ValueError(f"{benchmark!r} is not an lm-eval benchmark; known: {', '.join(TASKS)}")
    if backend not in BACKENDS:
        raise ValueError(f"unknown lm-eval backend {backend!r}; known: {', '.join(BACKENDS)}")
    opts = dict(options or {})
    system = SYSTEM_PROMPT if system_prompt is None else system_prompt
    # normalize_gen_kwargs (lm_eval/models/utils.py) forces temperature 0 when do_sample is False.
    gen_kwargs = {
        "do_sample": temperature > 0,
        "temperature": temperature,
        "top_p": top_p,
        "max_gen_toks": max_new_tokens,
    }
    return {
        "model": backend,
        "model_args": _model_args(model, backend, seed, opts),
        "tasks": [TASKS[benchmark]],
        "num_fewshot": opts.get("num_fewshot"),  # None: the task's own (IFEval 0, MMLU-Pro 5)
        "batch_size": opts.get("batch_size", "auto" if backend == "vllm" else 1),
        "device": opts.get("device"),
        "limit": limit,
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


def parse_lm_eval_results(benchmark: str, results: Mapping[str, Any]) -> tuple[dict[str, float], dict[str, float], int]:
    """(metrics, stderr, num_problems) from ``simple_evaluate``'s result dict for ``benchmark``.

    IFEval: the four accuracies (filter ``none``) and ``score``, their mean (the paper's IFEval number).
    MMLU-Pro: ``accuracy``, the group's size-weighted ``exact_match`` under the ``custom-extract`` filter.
    """
    per_task = results.get("results")
    if not isinstance(per_task, Mapping):
        raise ValueError("lm-eval results: no 'results' mapping")
    if benchmark == "ifeval":
        names: dict[str, str] = {m: m for m in IFEVAL_METRICS}
        task, filt, leaves = "ifeval", "none", ["ifeval"]
    elif benchmark == "mmlu_pro":
        names = {"accuracy": "exact_match"}
        task, filt = "mmlu_pro", "custom-extract"
        leaves = list(results.get("group_subtasks", {}).get("mmlu_pro", []))
    else:
        raise ValueError(f"{benchmark!r} is not an lm-eval benchmark; known: {', '.join(TASKS)}")
    if task not in per_task:
        raise ValueError(f"lm-eval results: no entry for task {task!r} (found: {', '.join(per_task)})")
    row = per_task[task]
    metrics: dict[str, float] = {}
    stderr: dict[str, float] = {}
    for ours, theirs in names.items():
        key = f"{theirs},{filt}"
        if key not in row:
            raise ValueError(f"lm-eval results[{task!r}]: no key {key!r} (found: {', '.join(row)})")
        metrics[ours] = fraction(row[key], f"lm-eval results[{task!r}][{key!r}]")
        err = row.get(f"{theirs}_stderr,{filt}")
        if isinstance(err, int | float):  # "N/A" where the tool computes none (IFEval's instruction-level metrics)
            stderr[ours] = float(err)
    if benchmark == "ifeval":
        metrics["score"] = sum(metrics[m] for m in IFEVAL_METRICS) / len(IFEVAL_METRICS)
    counts = results.get("n-samples", {})
    missing = [leaf for leaf in leaves if leaf not in counts]
    if not leaves or missing:
        raise ValueError(f"lm-eval results: no 'n-samples' count for {', '.join(missing or [task])}")
    return metrics, stderr, sum(int(counts[leaf]["effective"]) for leaf in leaves)


def run_lm_eval(
    benchmark: str,
    model: str,
    out_dir: Path,
    *,
    backend: str = "vllm",
    temperature: float = 0.8,
    top_p: float = 1.0,
    max_new_tokens: int = 3072,
    seed: int = 0,
    limit: int | None = None,
    system_prompt: str | None = None,
    options: Mapping[str, Any] | None = None,
) -> ExternalResult:
    """Run ``benchmark`` through lm-eval, save its full output under ``out_dir``, return the parsed result."""
    reason = lm_eval_missing(benchmark, backend)
    if reason:
        raise ToolMissing(reason)
    import lm_eval  # lm_eval: imported when used

    opts = dict(options or {})
    call = build_lm_eval_call(
        benchmark, model, backend=backend, temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens,
        seed=seed, limit=limit, system_prompt=system_prompt, options=opts,
    )  # fmt: skip
    if opts.get("data_files"):
        if benchmark != "ifeval":
            raise ValueError(f"options.data_files is supported for ifeval only, not {benchmark}")
        call["tasks"] = [_ifeval_local_task(opts["data_files"])]
    logger.info("lm-eval %s: model %s, backend %s, gen_kwargs %s", benchmark, model, backend, call["gen_kwargs"])
    results = lm_eval.simple_evaluate(**call)
    if results is None:  # only rank 0 returns results (lm_eval/evaluator.py)
        raise RuntimeError("lm_eval.simple_evaluate returned no results (not rank 0?)")
    out_dir = Path(out_dir)
    samples = results.pop("samples", None)
    if samples is not None:
        write_json_atomic(out_dir / f"lm_eval_{benchmark}_samples.json", samples)
    raw_path = write_json_atomic(out_dir / f"lm_eval_{benchmark}_results.json", results)
    metrics, stderr, num_problems = parse_lm_eval_results(benchmark, results)
    return ExternalResult(
        benchmark=benchmark,
        tool="lm_eval",
        tool_version=distribution_version("lm_eval"),
        metrics=metrics,
        stderr=stderr,
        num_problems=num_problems,
        raw_path=raw_path,
    )
