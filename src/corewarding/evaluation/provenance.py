"""The settings a stored score was produced with, and the keys that say whether a unit or two scores are comparable.

:class:`UnitSettings` reads a benchmark's config once and yields a unit's keys (:class:`UnitKeys`): the generation
key (what shaped its generations: model revision, data, sampling, backend, seed), the scoring key (checkers, metrics,
bootstrap) and its settings. Every metric row carries those settings (JSON) and their key: the generation backend and
its version, the tensor-parallel size, dtype, batch size, temperature, top-p, samples n, max new tokens, seed, the chat
template's SHA-256 and the system prompt, the checker and its version (which changes with its code:
``checker_version``), the benchmark file's SHA-256 and the model revision. The settings key hashes all of them but the
model revision (which always differs between a released checkpoint and a reproduction): two scores with the same key
were produced under the same protocol.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import cache
from importlib import metadata
from pathlib import Path
from types import ModuleType
from typing import Any

from omegaconf import DictConfig, OmegaConf

from corewarding.evaluation.benchmarks import Problem
from corewarding.evaluation.external import common as external_common
from corewarding.evaluation.external import registry as external_registry
from corewarding.evaluation.targets import Target
from corewarding.files import file_sha256
from corewarding.grading import answers, equivalence, math_verify_worker
from corewarding.lm.generation import SamplingSettings, vllm_dtype
from corewarding.schemas import BenchmarkConfig, BootstrapConfig, GenerationConfig, MathVerifyConfig, typed
from corewarding.settings_diff import settings_json, settings_key

# the benchmark's settings a math unit's generations depend on (besides the sampling)
GENERATION_FIELDS = ("name", "system_prompt", "answer_field", "limit")
KeyInputs = tuple[dict[str, Any], dict[str, Any], dict[str, Any]]  # what the keys hash: material, scoring, settings


def digest(material: Any) -> str:
    """A short stable hash of JSON-able ``material``."""
    text = json.dumps(material, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


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


def prompt_of(problems: Sequence[Problem], configured: str) -> str:
    """The system prompt the problems were asked with: the first problem's system message, else the setting."""
    for message in problems[0].messages if problems else []:
        if message.get("role") == "system":
            return str(message.get("content") or "")
    return "" if configured == "training" else configured


def generation_settings(generation: GenerationConfig) -> dict[str, Any]:
    """The backend, its version and its engine settings (tensor parallelism is 1 for transformers; vLLM's dtype is
    the one it runs with here: float32 on its CPU build)."""
    backend = generation.backend
    return {
        "generation_backend": backend,
        "generation_version": package_version("vllm" if backend == "vllm" else "transformers"),
        "tensor_parallel_size": int(generation.tensor_parallel_size or 1),
        "dtype": vllm_dtype(generation.dtype) if backend == "vllm" else generation.dtype,
        "batch_size": generation.batch_size,
    }


@dataclass(frozen=True)
class UnitKeys:
    """A unit's identity: the key of what shaped its generations (``material``), the key of how they are scored,
    its settings with their key, and each checker's settings (the unit's plus the checker and its version) with the
    columns they give its metric rows (``settings``, ``settings_key``)."""

    generation: str
    scoring: str
    material: dict[str, Any]
    settings: dict[str, Any]
    settings_key: str
    checkers: dict[str, dict[str, Any]] = field(default_factory=dict)
    columns: dict[str, dict[str, str]] = field(default_factory=dict)  # per checker: its metric rows' settings columns

    @classmethod
    def of(
        cls, material: dict[str, Any], scoring: dict[str, Any], settings: dict[str, Any], checkers: dict[str, Any]
    ) -> UnitKeys:
        """The keys of what shaped a unit's generations (``material``), of how they are scored, and of its
        ``settings``; with each checker's settings and the columns its metric rows carry."""
        generation, scoring_key = digest(material), digest(scoring)
        columns = {checker: settings_columns(found) for checker, found in checkers.items()}
        return cls(generation, scoring_key, material, settings, settings_key(settings), checkers, columns)

    def with_tool(self, tool: str, tool_version: str | None) -> UnitKeys:
        """These keys with an external tool as the checker (known once the tool has run)."""
        found = checker_settings(self.settings, tool, tool_version)
        return replace(self, checkers={tool: found}, columns={tool: settings_columns(found)})


@dataclass(frozen=True)
class UnitSettings:
    """What a benchmark's units are evaluated with, read from its config once: it yields each unit's keys."""

    name: str
    kind: str  # math | external
    benchmark: BenchmarkConfig
    generation: GenerationConfig
    sampling: SamplingSettings  # n: 1 when greedy
    seed: int
    chunk_size: int
    checkers: tuple[str, ...]
    math_verify_timeout_s: float
    math_verify_workers: int | None  # None: one per core
    bootstrap: BootstrapConfig
    engine: dict[str, Any]  # generation_settings
    composed_generation: dict[str, Any]  # the generation section as composed (vLLM's dtype: the one it runs with)
    composed_benchmark: dict[str, Any]  # the benchmark section as composed, interpolations unresolved
    resolved_benchmark: dict[str, Any]  # and resolved (what an external tool reads)

    @classmethod
    def from_config(cls, cfg: DictConfig) -> UnitSettings:
        """The settings of ``cfg``'s benchmark (a config of ``configs/eval.yaml``)."""
        bench = typed(BenchmarkConfig, cfg.benchmark, "benchmark")
        generation = typed(GenerationConfig, cfg.generation, "generation")
        verify = typed(MathVerifyConfig, cfg.math_verify, "math_verify")
        bootstrap = typed(BootstrapConfig, cfg.bootstrap, "bootstrap")
        composed: dict[str, Any] = OmegaConf.to_container(cfg.generation)  # type: ignore[assignment]  # a mapping
        if generation.backend == "vllm":
            composed["dtype"] = vllm_dtype(generation.dtype)
        temperature = float(bench.temperature)
        return cls(
            name=bench.name,
            kind=bench.kind,
            benchmark=bench,
            generation=generation,
            sampling=SamplingSettings(
                1 if temperature == 0 else bench.n, temperature, float(bench.top_p), bench.max_new_tokens
            ),
            seed=int(cfg.seed),
            chunk_size=int(cfg.chunk_size),
            checkers=tuple(str(c) for c in cfg.checkers),
            math_verify_timeout_s=float(verify.timeout_s),
            math_verify_workers=verify.workers,
            bootstrap=bootstrap,
            engine=generation_settings(generation),
            composed_generation=composed,
            composed_benchmark=OmegaConf.to_container(cfg.benchmark),  # type: ignore[arg-type]  # a mapping
            resolved_benchmark=OmegaConf.to_container(cfg.benchmark, resolve=True),  # type: ignore[arg-type]  # a mapping
        )

    @property
    def pairs(self) -> list[tuple[str, str]]:
        """Each (checker, metric) of a math unit's metric rows, in the config's order."""
        return [(c, m) for c in self.checkers for m in self.benchmark.metrics]

    def settings(self, target: Target, benchmark_sha256: str | None, prompt: str, n: int) -> dict[str, Any]:
        """The settings of one unit, all but the checker (``checker_settings`` adds it)."""
        return {
            **self.engine,
            "temperature": self.sampling.temperature,
            "top_p": self.sampling.top_p,
            "n": n,
            "max_new_tokens": self.sampling.max_new_tokens,
            "seed": self.seed,
            "chat_template_sha256": chat_template_sha256(target.model_path),
            "prompt": prompt,
            "benchmark_sha256": benchmark_sha256,
            "model_revision": target.revision,
        }

    def keys(self, target: Target, data_path: Path | None = None, problems: Sequence[Problem] = ()) -> UnitKeys:
        """A unit's keys: a math unit's generations come from ``data_path``'s ``problems``; an external unit (no data
        path) has one key of everything that shapes its result, and the tool as its checker once it has run
        (``UnitKeys.with_tool``)."""
        if data_path is None:
            material, scoring, settings = self._external_inputs(target)
            checkers: dict[str, dict[str, Any]] = {}
        else:
            material, scoring, settings = self._math_inputs(target, data_path, problems)
            checkers = {c: checker_settings(settings, c) for c in self.checkers}
        return UnitKeys.of(material, scoring, settings, checkers)

    def _math_inputs(self, target: Target, data_path: Path, problems: Sequence[Problem]) -> KeyInputs:
        """What shaped a math unit's generations, how they are scored, and its settings."""
        data_sha256 = file_sha256(data_path)
        material = {
            "model_revision": target.revision,
            "data_sha256": data_sha256,
            "benchmark": {k: getattr(self.benchmark, k) for k in GENERATION_FIELDS},
            "sampling": asdict(self.sampling),
            "generation": self.composed_generation,
            "seed": self.seed,
            "chunk_size": self.chunk_size,
        }
        scoring = {
            "checkers": list(self.checkers),
            "math_verify_timeout_s": self.math_verify_timeout_s,
            "metrics": list(self.benchmark.metrics),
            "bootstrap": asdict(self.bootstrap),
            "seed": self.seed,
        }
        prompt = prompt_of(problems, str(self.benchmark.system_prompt))
        return material, scoring, self.settings(target, data_sha256, prompt, self.sampling.n)

    def _external_inputs(self, target: Target) -> KeyInputs:
        """What shapes an external unit's result, which is also how it is scored (one key), and its settings (the tool
        reads its own copy of the benchmark: they have no benchmark SHA-256)."""
        material = {
            "model_revision": target.revision,
            "benchmark": self.composed_benchmark,
            "backend": self.generation.backend,
            "seed": self.seed,
        }
        settings = self.settings(target, None, self.benchmark.system_prompt or "", self.benchmark.n)
        return material, material, settings


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


def settings_columns(settings: Mapping[str, Any]) -> dict[str, str]:
    """The ``settings`` and ``settings_key`` columns of a metric row scored under ``settings`` (a checker's)."""
    return {"settings": settings_json(settings), "settings_key": settings_key(settings)}
