"""The settings a stored score was produced with, and the key that says whether two scores are comparable.

Every metric row carries ``settings`` (JSON) and ``settings_key``: the generation backend and its version, the
tensor-parallel size, dtype, batch size, temperature, top-p, samples n, max new tokens, seed, the chat template's
SHA-256 and the system prompt, the checker and its version (which changes with its code: ``checker_version``), the
benchmark file's SHA-256 and the model revision. The key hashes all of them but the model revision (which always differs
between a released checkpoint and a reproduction): two scores with the same key were produced under the same protocol.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from functools import cache
from importlib import metadata
from pathlib import Path
from types import ModuleType
from typing import Any

from omegaconf import DictConfig

from corewarding.evaluation.benchmarks import Problem
from corewarding.evaluation.external import common as external_common
from corewarding.evaluation.external import registry as external_registry
from corewarding.grading import answers, equivalence, math_verify_worker
from corewarding.lm.generation import vllm_dtype


@cache
def package_version(name: str) -> str | None:
    """The installed version of a distribution, or None when it is not installed (read once per process: every
    metric row records its checker's)."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def chat_template_sha256(model_path: str | Path) -> str | None:
    """SHA-256 (16 hex) of the model folder's chat template (``chat_template.jinja`` or tokenizer_config.json's
    ``chat_template``), read from the files without loading the tokenizer; None when the folder has none."""
    folder = Path(model_path)
    jinja = folder / "chat_template.jinja"
    if jinja.is_file():
        text = jinja.read_text(encoding="utf-8")
    else:
        try:
            config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        template = config.get("chat_template") if isinstance(config, dict) else None
        if template is None:
            return None
        text = template if isinstance(template, str) else json.dumps(template, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def prompt_of(problems: list[Problem], configured: str) -> str:
    """The system prompt the problems were asked with: the first problem's system message, else the setting."""
    for message in problems[0].messages if problems else []:
        if message.get("role") == "system":
            return str(message.get("content") or "")
    return "" if configured == "training" else configured


def generation_settings(cfg: DictConfig) -> dict[str, Any]:
    """The backend, its version and its engine settings (tensor parallelism is 1 for transformers; vLLM's dtype is
    the one it runs with here: float32 on its CPU build)."""
    gen = cfg.generation
    backend = str(gen.backend)
    return {
        "generation_backend": backend,
        "generation_version": package_version("vllm" if backend == "vllm" else "transformers"),
        "tensor_parallel_size": int(gen.get("tensor_parallel_size", 1) or 1),
        "dtype": vllm_dtype(str(gen.dtype)) if backend == "vllm" else str(gen.dtype),
        "batch_size": int(gen.batch_size) if gen.get("batch_size") is not None else None,
    }


def unit_settings(
    cfg: DictConfig,
    *,
    model_path: str,
    model_revision: str,
    benchmark_sha256: str | None,
    prompt: str,
    n: int,
) -> dict[str, Any]:
    """The settings of one (target, benchmark) unit, all but the checker (``checker_settings`` adds it)."""
    spec = cfg.benchmark
    return {
        **generation_settings(cfg),
        "temperature": float(spec.temperature),
        "top_p": float(spec.top_p),
        "n": n,
        "max_new_tokens": int(spec.max_new_tokens),
        "seed": int(cfg.seed),
        "chat_template_sha256": chat_template_sha256(model_path),
        "prompt": prompt,
        "benchmark_sha256": benchmark_sha256,
        "model_revision": model_revision,
    }


# The modules whose code decides a checker's verdict: the strict checker's normalisation, math-verify's wrapper (what
# it parses and how), and for an external tool the adapter that reads its results.
CHECKER_CODE: dict[str, tuple[ModuleType, ...]] = {
    "strict": (answers,),
    "math_verify": (answers, equivalence, math_verify_worker),
}
EXTERNAL_CODE: tuple[ModuleType, ...] = (external_common, external_registry)


@cache
def code_digest(modules: tuple[ModuleType, ...]) -> str:
    """SHA-256 (12 hex) of the modules' source files, read once per process."""
    digest = hashlib.sha256()
    for module in modules:
        digest.update(Path(str(module.__file__)).read_bytes())
    return digest.hexdigest()[:12]


def checker_version(checker: str, tool_version: str | None = None) -> str:
    """A version that changes with the checker's code: ``code-<digest>`` of the strict checker's source,
    ``<math-verify version>+code-<digest>`` of math-verify with our wrapper, ``<tool version>+code-<digest>`` of an
    external tool with its adapter. Two scores of one settings key were graded by the same code."""
    if checker in CHECKER_CODE:
        package = package_version("math-verify") if checker == "math_verify" else None
        code = f"code-{code_digest(CHECKER_CODE[checker])}"
    else:
        package, code = tool_version, f"code-{code_digest(EXTERNAL_CODE)}"
    return f"{package}+{code}" if package else code


def checker_settings(settings: Mapping[str, Any], checker: str, tool_version: str | None = None) -> dict[str, Any]:
    """A unit's settings with the checker that scored a row and its version (``checker_version``)."""
    return {**settings, "checker_tool": checker, "checker_version": checker_version(checker, tool_version)}
