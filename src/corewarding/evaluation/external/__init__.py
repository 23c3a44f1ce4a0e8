"""The paper's non-math benchmarks through their official tools, each skipped with a clear message when absent.

IFEval and MMLU-Pro run through lm-evaluation-harness's Python API (the ``eval`` extra; vllm or hf backend),
LiveCodeBench v6 through ``lcb_runner``, CRUX through ZeroEval. Each tool is registered here once; a benchmark's
``configs/benchmark/<name>.yaml`` (``kind: external``) names its tool and task. ``run_external`` is the one entry
point; ``missing_reason`` says, without running anything, whether a benchmark's tool can run here.
"""

from __future__ import annotations

from corewarding.evaluation.external.common import ExternalResult, RunSettings, ToolMissing
from corewarding.evaluation.external.crux import ZeroEval
from corewarding.evaluation.external.livecodebench import LiveCodeBench
from corewarding.evaluation.external.lm_eval_tasks import LmEval
from corewarding.evaluation.external.registry import (
    TOOLS,
    ExternalBenchmark,
    ExternalTool,
    external_benchmark,
    external_benchmarks,
    missing_reason,
    register,
    run_external,
)

__all__ = [
    "TOOLS",
    "ExternalBenchmark",
    "ExternalResult",
    "ExternalTool",
    "RunSettings",
    "ToolMissing",
    "external_benchmark",
    "external_benchmarks",
    "missing_reason",
    "register",
    "run_external",
]

register(LmEval(), LiveCodeBench(), ZeroEval())  # the order the known benchmarks are listed in
