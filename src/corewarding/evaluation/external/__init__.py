"""The paper's non-math benchmarks through their official tools, each skipped with a clear message when absent.

IFEval and MMLU-Pro run through lm-evaluation-harness's Python API (the ``eval`` extra; vllm or hf backend),
LiveCodeBench v6 through ``lcb_runner``, CRUX through ZeroEval. ``run_external`` is the one entry point;
``missing_reason`` says, without running anything, whether a benchmark's tool can run here.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from corewarding.evaluation.external.common import ExternalResult, ToolMissing
from corewarding.evaluation.external.crux import crux_missing, run_crux
from corewarding.evaluation.external.livecodebench import lcb_missing, run_livecodebench
from corewarding.evaluation.external.lm_eval_tasks import lm_eval_missing, run_lm_eval

__all__ = ["BENCHMARKS", "ExternalResult", "ToolMissing", "missing_reason", "run_external"]

# benchmark -> the tool that runs it (the `checker` column)
BENCHMARKS: dict[str, str] = {
    "ifeval": "lm_eval",
    "mmlu_pro": "lm_eval",
    "livecodebench_v6": "livecodebench",
    "crux": "zeroeval",
}


def _check(benchmark: str) -> None:
    if benchmark not in BENCHMARKS:
        raise ValueError(f"unknown external benchmark {benchmark!r}; known: {', '.join(BENCHMARKS)}")


def missing_reason(benchmark: str, *, backend: str = "vllm", options: Mapping[str, Any] | None = None) -> str | None:
    """None when the tool can run here, else the clear skip message."""
    _check(benchmark)
    if BENCHMARKS[benchmark] == "lm_eval":
        return lm_eval_missing(benchmark, backend)
    if benchmark == "livecodebench_v6":
        return lcb_missing()
    return crux_missing(options)


def run_external(
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
    """Run ``benchmark`` on ``model`` (a Hub id or a local HF folder) with the paper's sampling settings.

    Raises ToolMissing (with what to install) when the tool is absent. ``system_prompt=None`` uses the training
    system prompt (lm-eval benchmarks only; the code tools use their own prompts). ``backend`` ("vllm" or "hf")
    applies to the lm-eval benchmarks; the code tools generate with vllm. ``options`` are tool-specific (see each
    adapter module).
    """
    _check(benchmark)
    out_dir = Path(out_dir)
    if BENCHMARKS[benchmark] == "lm_eval":
        return run_lm_eval(
            benchmark, model, out_dir, backend=backend, temperature=temperature, top_p=top_p,
            max_new_tokens=max_new_tokens, seed=seed, limit=limit, system_prompt=system_prompt, options=options,
        )  # fmt: skip
    if backend != "vllm":
        raise ValueError(f"{benchmark}: its tool generates with vllm; backend {backend!r} does not apply")
    runner = run_livecodebench if benchmark == "livecodebench_v6" else run_crux
    return runner(
        model, out_dir, temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens, limit=limit,
        options=options,
    )  # fmt: skip
