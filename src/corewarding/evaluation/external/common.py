"""What every external benchmark adapter shares: the result record, the missing-tool error, small helpers."""

from __future__ import annotations

import importlib.metadata
import json
import logging
import os
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from corewarding.extras import module_missing as module_missing  # the adapters' one installed-module check

logger = logging.getLogger(__name__)

EVAL_EXTRA = "pip install 'corewarding[eval]'"


class ToolMissing(RuntimeError):
    """The benchmark's tool is not installed; the message says what to install (e.g. the eval extra)."""


@dataclass(frozen=True)
class ExternalResult:
    """One benchmark run through its official tool, reduced to fractions in [0, 1]."""

    benchmark: str  # "ifeval" | "mmlu_pro" | "livecodebench_v6" | "crux"
    tool: str  # "lm_eval" | "livecodebench" | "zeroeval" (the `checker` column in metrics.parquet)
    tool_version: str
    metrics: dict[str, float]  # IFEval: the four accuracies + "score"; MMLU-Pro: "accuracy"; code: "pass@1"
    stderr: dict[str, float] = field(default_factory=dict)  # where the tool reports one
    num_problems: int = 0
    raw_path: Path | None = None  # the tool's own full output, saved under out_dir


@dataclass(frozen=True)
class RunSettings:
    """What a run adds to a benchmark's config and its sampling (``SamplingSettings``)."""

    backend: str = "vllm"  # lm-eval: "vllm" or "hf"; the code tools generate with vllm
    seed: int = 0
    limit: int | None = None  # the first N problems (smoke runs); None: all
    system_prompt: str | None = None  # None: the training system prompt (lm-eval); the code tools use their own
    options: Mapping[str, Any] = field(default_factory=dict)  # tool-specific (see each tool's module)


def distribution_version(module: str) -> str:
    """The installed version of the distribution that provides ``module`` ("unknown" when not recorded)."""
    for dist in importlib.metadata.packages_distributions().get(module, []):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return "unknown"


def write_json_atomic(path: Path, obj: Any) -> Path:
    """Write ``obj`` as JSON through a temporary file renamed into place (no half-written file on a crash)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(obj, fh, indent=2, default=str, ensure_ascii=False)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def fraction(value: Any, where: str) -> float:
    """``value`` as a float in [0, 1]; a clear error naming ``where`` otherwise."""
    try:
        out = float(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{where}: expected a number, got {value!r}") from exc
    if not 0.0 <= out <= 1.0:
        raise ValueError(f"{where}: expected a fraction in [0, 1], got {out}")
    return out


def run_logged(cmd: Sequence[str], cwd: Path, log_path: Path, env: dict[str, str] | None = None) -> None:
    """Run a tool's command with stdout+stderr to ``log_path``; a non-zero exit raises with the log's tail."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    logger.info("running %s (cwd %s, log %s)", " ".join(cmd), cwd, log_path)
    with log_path.open("w", encoding="utf-8") as log:
        proc = subprocess.run(list(cmd), cwd=cwd, stdout=log, stderr=subprocess.STDOUT, env=env, check=False)
    if proc.returncode != 0:
        tail = "\n".join(log_path.read_text(encoding="utf-8", errors="replace").splitlines()[-20:])
        raise RuntimeError(f"{cmd[0]} ... exited with {proc.returncode}; log {log_path}; last lines:\n{tail}")
