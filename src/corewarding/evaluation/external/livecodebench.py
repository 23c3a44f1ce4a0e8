"""LiveCodeBench v6 (code generation, pass@1) through its official runner, ``lcb_runner``.

lcb_runner is not on PyPI: it is installed from the LiveCodeBench/LiveCodeBench GitHub repository (clone, then
``pip install -e .``). Read from that repository's ``lcb_runner/runner/parser.py`` (the flags),
``lcb_runner/runner/main.py`` (it writes ``output/<model_repr>/<scenario>_<n>_<temperature>_eval.json`` relative to
its working directory, holding ``[metrics, results, metadata]``) and ``lcb_runner/evaluation/pass_k_utils.py``
(``metrics = {"pass@1": mean, ..., "detail": {"pass@1": {problem_index: value}}}``).
The runner uses its own prompts per model style (``--model`` must be a key of its ``LanguageModelStore``), so our
system prompt does not apply here.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from corewarding.evaluation.external.common import (
    ExternalResult,
    RunSettings,
    distribution_version,
    fraction,
    module_missing,
    run_logged,
)
from corewarding.evaluation.external.registry import ExternalBenchmark, ExternalTool
from corewarding.lm.generation import SamplingSettings

RELEASE = "release_v6"  # 1,055 problems (the paper's LiveCodeBench v6)
SAMPLES = 1  # completions per problem (its pass@1; benchmark.n is not passed on)
INSTALL = (
    "LiveCodeBench's runner (module lcb_runner) is not on PyPI: clone the LiveCodeBench/LiveCodeBench GitHub "
    "repository and `pip install -e .` it into this environment (it generates with vllm, so a GPU machine)"
)


def lcb_missing() -> str | None:
    """None when lcb_runner and vllm are importable, else the skip message."""
    absent = module_missing("lcb_runner", "vllm")
    if absent:
        return f"livecodebench_v6 skipped: {', '.join(absent)} not installed. {INSTALL}"
    return None


def build_lcb_command(model: str, sampling: SamplingSettings, options: Mapping[str, Any] | None = None) -> list[str]:
    """The ``python -m lcb_runner.runner.main`` command line for a code-generation run with our settings (pure).

    ``model`` is a Hub id or a local folder. A local folder goes to ``--local_model_path`` and needs
    ``options['lcb_model']``, the LanguageModelStore key whose prompt style fits (e.g. a Qwen2.5 instruct id).
    Other options: release_version, num_process_evaluate, timeout, tensor_parallel_size, dtype, debug (first 5).
    """
    opts = dict(options or {})
    local = Path(model).is_dir()
    lcb_model = opts.get("lcb_model") or (None if local else model)
    if lcb_model is None:
        raise ValueError(
            f"livecodebench_v6: {model} is a local folder; set options.lcb_model to the lcb_runner "
            "LanguageModelStore key whose prompt style fits it"
        )
    cmd = [sys.executable, "-m", "lcb_runner.runner.main", "--model", str(lcb_model)]
    if local:
        cmd += ["--local_model_path", str(Path(model).resolve())]
    cmd += ["--scenario", "codegeneration", "--release_version", str(opts.get("release_version", RELEASE))]
    cmd += ["--n", str(SAMPLES), "--temperature", str(sampling.temperature), "--top_p", str(sampling.top_p)]
    cmd += ["--max_tokens", str(sampling.max_new_tokens), "--evaluate"]
    cmd += [
        "--num_process_evaluate",
        str(opts.get("num_process_evaluate", 12)),
        "--timeout",
        str(opts.get("timeout", 6)),
    ]
    cmd += [
        "--tensor_parallel_size",
        str(opts.get("tensor_parallel_size", 1)),
        "--dtype",
        str(opts.get("dtype", "bfloat16")),
    ]
    if opts.get("debug"):
        cmd.append("--debug")
    return cmd


def parse_lcb_eval(eval_json: Sequence[Any]) -> tuple[dict[str, float], int]:
    """(metrics, num_problems) from lcb_runner's ``*_eval.json`` (``[metrics, results, metadata]``)."""
    if not isinstance(eval_json, Sequence) or not eval_json or not isinstance(eval_json[0], Mapping):
        raise ValueError("lcb_runner eval file: expected a list whose first item is the metrics mapping")
    head = eval_json[0]
    if "pass@1" not in head:
        raise ValueError(f"lcb_runner eval file: no 'pass@1' in its metrics (found: {', '.join(head)})")
    per_problem = head.get("detail", {}).get("pass@1")
    if not isinstance(per_problem, Mapping) or not per_problem:
        raise ValueError("lcb_runner eval file: no per-problem 'detail' -> 'pass@1' mapping")
    return {"pass@1": fraction(head["pass@1"], "lcb_runner eval file pass@1")}, len(per_problem)


def find_lcb_eval_file(run_dir: Path, n: int, temperature: float) -> Path:
    """The ``*codegeneration_<n>_<temperature>_eval.json`` lcb_runner wrote under ``run_dir/output``."""
    found = sorted((run_dir / "output").glob(f"*/*codegeneration_{n}_{temperature}_eval.json"))
    if len(found) != 1:
        raise FileNotFoundError(
            f"expected one lcb_runner eval file under {run_dir / 'output'}, found {[str(p) for p in found]}"
        )
    return found[0]


class LiveCodeBench(ExternalTool):
    """LiveCodeBench's ``lcb_runner``: generation (vllm) and grading of its code-generation scenario."""

    name = "livecodebench"

    def missing(self, benchmark: ExternalBenchmark, settings: RunSettings) -> str | None:
        return lcb_missing()

    def run(
        self, benchmark: ExternalBenchmark, model: str, out_dir: Path, sampling: SamplingSettings, settings: RunSettings
    ) -> ExternalResult:
        """Generate and grade with lcb_runner in ``out_dir/livecodebench``; parse its eval file."""
        if settings.limit is not None:
            raise ValueError(
                f"{benchmark.name}: lcb_runner has no problem limit (options.debug: true runs its first 5)"
            )
        cmd = build_lcb_command(model, sampling, settings.options)
        run_dir = out_dir / "livecodebench"
        run_dir.mkdir(parents=True, exist_ok=True)
        run_logged(cmd, cwd=run_dir, log_path=run_dir / "lcb_runner.log")
        eval_path = find_lcb_eval_file(run_dir, SAMPLES, sampling.temperature)
        metrics, num_problems = parse_lcb_eval(json.loads(eval_path.read_text(encoding="utf-8")))
        return ExternalResult(
            benchmark=benchmark.name,
            tool=self.name,
            tool_version=distribution_version("lcb_runner"),
            metrics=metrics,
            num_problems=num_problems,
            raw_path=eval_path,
        )
