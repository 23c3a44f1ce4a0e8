"""CRUX (CRUXEval-O, 800 problems, pass@1) through ZeroEval, the tool the paper used.

ZeroEval is a repository of scripts, not a package (PyPI's ``zeroeval`` is an unrelated SDK): clone the
yuchenlin/ZeroEval GitHub repository, install its requirements, and point ``ZEROEVAL_ROOT`` (or
``options['zeroeval_root']``) at the checkout. Read from that repository: ``src/unified_infer.py`` (the flags;
``--filepath`` names the generation file), ``zero_eval_local.sh`` (the flags it passes for local models) and
``src/evaluation/crux_eval.py`` (``eval_model(model, filepath)`` scores a generation file and returns
``{"Model", "Mode", "Acc", "No answer", "Total", "Reason Lens"}`` with Acc and No answer as percentage strings).
ZeroEval prompts with its own CRUX template, so our system prompt does not apply here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from corewarding.evaluation.external.common import (
    ExternalResult,
    RunSettings,
    fraction,
    module_missing,
    run_logged,
)
from corewarding.evaluation.external.registry import ExternalBenchmark, ExternalTool
from corewarding.lm.generation import SamplingSettings

ROOT_ENV = "ZEROEVAL_ROOT"
REQUIRED_FILES = ("src/unified_infer.py", "src/evaluation/crux_eval.py")
INSTALL = (
    "CRUX runs through ZeroEval, which is not a PyPI package (PyPI 'zeroeval' is an unrelated SDK): clone the "
    f"yuchenlin/ZeroEval GitHub repository, pip install -r requirements.txt, and set {ROOT_ENV}=<the checkout>"
)
# ZeroEval's crux_eval.py keys a run "<pretty name>%<mode>"; "sampling" is its mode for temperature > 0.
SCORE_SCRIPT = (
    "import json, sys\n"
    "sys.path.insert(0, 'src/evaluation')\n"
    "from crux_eval import eval_model\n"
    "row = eval_model(sys.argv[2], sys.argv[1])\n"
    "open(sys.argv[3], 'w').write(json.dumps(row, indent=2))\n"
)


def zeroeval_root(options: Mapping[str, Any] | None = None) -> Path | None:
    """The ZeroEval checkout from options or the environment (None when unset)."""
    root = (options or {}).get("zeroeval_root") or os.environ.get(ROOT_ENV)
    return Path(root) if root else None


def crux_missing(options: Mapping[str, Any] | None = None) -> str | None:
    """None when a ZeroEval checkout and vllm are available, else the skip message."""
    root = zeroeval_root(options)
    if root is None:
        return f"crux skipped: {ROOT_ENV} is not set. {INSTALL}"
    absent = [f for f in REQUIRED_FILES if not (root / f).is_file()]
    if absent:
        return f"crux skipped: {root} is not a ZeroEval checkout (no {', '.join(absent)}). {INSTALL}"
    if module_missing("vllm"):
        return "crux skipped: ZeroEval generates with vllm, which is not installed (pip install 'corewarding[gpu]')"
    return None


def build_zeroeval_infer_command(
    model: str, generation_file: Path, sampling: SamplingSettings, settings: RunSettings
) -> list[str]:
    """ZeroEval's ``src/unified_infer.py`` command for CRUX with our settings, run from the checkout (pure)."""
    opts = settings.options
    cmd = [sys.executable, "src/unified_infer.py", "--engine", "vllm", "--data_name", "crux"]
    cmd += ["--model_name", model, "--model_pretty_name", pretty_name(model), "--run_name", "sampling"]
    cmd += ["--use_hf_conv_template", "--use_imend_stop"]  # as zero_eval_local.sh passes for local models
    cmd += [
        "--tensor_parallel_size",
        str(opts.get("tensor_parallel_size", 1)),
        "--dtype",
        str(opts.get("dtype", "bfloat16")),
    ]
    cmd += ["--temperature", str(sampling.temperature), "--top_p", str(sampling.top_p), "--repetition_penalty", "1.0"]
    cmd += ["--max_tokens", str(sampling.max_new_tokens), "--batch_size", str(opts.get("batch_size", 4))]
    cmd += ["--filepath", str(Path(generation_file).resolve()), "--overwrite"]
    if settings.limit is not None:
        cmd += ["--start_index", "0", "--end_index", str(settings.limit)]
    return cmd


def pretty_name(model: str) -> str:
    """The name ZeroEval records a model under: the last part of a Hub id or folder."""
    return Path(model.rstrip("/")).name


def parse_crux_row(row: Mapping[str, Any]) -> tuple[dict[str, float], int]:
    """(metrics, num_problems) from the row ZeroEval's ``crux_eval.eval_model`` returns."""
    for key in ("Acc", "No answer", "Total"):
        if key not in row:
            raise ValueError(f"ZeroEval crux row: no {key!r} (found: {', '.join(row)})")
    metrics = {
        "pass@1": fraction(float(row["Acc"]) / 100, "ZeroEval crux row Acc"),
        "no_answer": fraction(float(row["No answer"]) / 100, "ZeroEval crux row 'No answer'"),
    }
    return metrics, int(row["Total"])


class ZeroEval(ExternalTool):
    """ZeroEval's CRUX run: generation with its ``unified_infer.py`` (vllm), scoring with its ``crux_eval``."""

    name = "zeroeval"

    def missing(self, benchmark: ExternalBenchmark, settings: RunSettings) -> str | None:
        return crux_missing(settings.options)

    def run(
        self, benchmark: ExternalBenchmark, model: str, out_dir: Path, sampling: SamplingSettings, settings: RunSettings
    ) -> ExternalResult:
        """Generate CRUX answers into ``out_dir/crux``, score them with ZeroEval's crux_eval, parse the row."""
        root = zeroeval_root(settings.options)
        assert root is not None  # crux_missing checked it
        run_dir = out_dir / "crux"
        generation_file = run_dir / f"{pretty_name(model)}.json"
        cmd = build_zeroeval_infer_command(model, generation_file, sampling, settings)
        run_logged(cmd, cwd=root, log_path=run_dir / "zeroeval_infer.log")
        score_path = run_dir / "crux_score.json"
        score_cmd = [
            sys.executable,
            "-c",
            SCORE_SCRIPT,
            str(generation_file.resolve()),
            f"{pretty_name(model)}%sampling",
        ]
        run_logged([*score_cmd, str(score_path.resolve())], cwd=root, log_path=run_dir / "zeroeval_score.log")
        metrics, num_problems = parse_crux_row(json.loads(score_path.read_text(encoding="utf-8")))
        return ExternalResult(
            benchmark=benchmark.name,
            tool=self.name,
            tool_version=_git_commit(root),
            metrics=metrics,
            num_problems=num_problems,
            raw_path=generation_file,
        )


def _git_commit(root: Path) -> str:
    """The checkout's commit (ZeroEval has no version number); "unknown" outside git."""
    proc = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, check=False)
    return proc.stdout.strip() if proc.returncode == 0 else "unknown"
