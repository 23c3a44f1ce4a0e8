"""The external tools, each registered once, and the benchmarks that ``configs/benchmark/*.yaml`` gives them.

A benchmark of ``kind: external`` names its ``tool`` (lm_eval, livecodebench, zeroeval) and the tool's ``task``;
everything else a tool needs to read (lm-eval's metrics and filter, say) is in the same file. ``missing_reason``
and ``run_external`` look the tool up by that name: adding a benchmark to a registered tool is a YAML file.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from omegaconf import DictConfig, OmegaConf

from corewarding.config import config_dir
from corewarding.evaluation.external.common import ExternalResult, RunSettings, ToolMissing
from corewarding.lm.generation import SamplingSettings


@dataclass(frozen=True)
class ExternalBenchmark:
    """One ``kind: external`` benchmark: its name, its tool and the tool's task, and the whole YAML section."""

    name: str
    tool: str  # a registered ExternalTool's name (the metric rows' checker)
    task: str  # the tool's own name for it
    spec: Mapping[str, Any] = field(default_factory=dict)  # the `benchmark:` section (tool-specific keys too)

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> ExternalBenchmark:
        """From a ``benchmark:`` section (a YAML file's, or a composed config's with its overrides)."""
        missing = [k for k in ("name", "tool", "task") if not spec.get(k)]
        if missing:
            raise ValueError(f"external benchmark {spec.get('name')!r}: no {', '.join(missing)} in its config")
        return cls(name=str(spec["name"]), tool=str(spec["tool"]), task=str(spec["task"]), spec=dict(spec))

    @property
    def sampling(self) -> SamplingSettings:
        """The sampling its config sets (the paper's: temperature 0.8, top-p 1.0, 3,072 new tokens)."""
        s = self.spec
        return SamplingSettings(
            n=int(s["n"]), temperature=float(s["temperature"]), top_p=float(s["top_p"]),
            max_new_tokens=int(s["max_new_tokens"]),
        )  # fmt: skip


class ExternalTool(ABC):
    """A benchmark tool: whether it can run here, and one run of a benchmark through it."""

    name: ClassVar[str]  # what a benchmark's `tool:` names; also the `checker` of its metric rows
    backends: ClassVar[tuple[str, ...]] = ("vllm",)  # the generation backends it can use

    @abstractmethod
    def missing(self, benchmark: ExternalBenchmark, settings: RunSettings) -> str | None:
        """Why it cannot run ``benchmark`` here (the skip message naming what to install), or None."""

    @abstractmethod
    def run(
        self, benchmark: ExternalBenchmark, model: str, out_dir: Path, sampling: SamplingSettings, settings: RunSettings
    ) -> ExternalResult:
        """Run ``benchmark`` on ``model``, keep the tool's own output under ``out_dir``, return its parsed numbers
        (``run_external`` calls it once ``missing`` said None)."""


TOOLS: dict[str, ExternalTool] = {}


def register(*tools: ExternalTool) -> None:
    """Add tools to the registry (each once; the order is the order their benchmarks are listed in)."""
    for tool in tools:
        if tool.name in TOOLS:
            raise ValueError(f"external tool {tool.name!r} is registered twice")
        TOOLS[tool.name] = tool


def external_benchmarks() -> dict[str, ExternalBenchmark]:
    """Every ``kind: external`` benchmark under the config folder, grouped by tool in registry order."""
    found: list[ExternalBenchmark] = []
    for path in sorted((config_dir() / "benchmark").glob("*.yaml")):
        loaded = OmegaConf.load(path)
        if not isinstance(loaded, DictConfig):
            continue
        section = loaded.get("benchmark")  # raw read: a benchmark file, read before composing (any kind)
        if isinstance(section, DictConfig) and section.get("kind") == "external":  # raw read: as above
            spec = OmegaConf.to_container(section, resolve=False)
            found.append(ExternalBenchmark.from_spec(spec))  # type: ignore[arg-type]  # a DictConfig's container: a dict
    order = list(TOOLS)
    found.sort(key=lambda b: (order.index(b.tool) if b.tool in order else len(order), b.name))
    return {b.name: b for b in found}


def external_benchmark(name: str) -> ExternalBenchmark:
    """The external benchmark ``configs/benchmark/<name>.yaml`` declares; a ValueError lists the known ones."""
    known = external_benchmarks()
    if name not in known:
        raise ValueError(f"unknown external benchmark {name!r}; known: {', '.join(known)}")
    return known[name]


def tool_for(benchmark: str | ExternalBenchmark) -> tuple[ExternalBenchmark, ExternalTool]:
    """The benchmark (looked up by name when a name is given) and its registered tool."""
    bench = external_benchmark(benchmark) if isinstance(benchmark, str) else benchmark
    if bench.tool not in TOOLS:
        raise ValueError(f"{bench.name}: no external tool {bench.tool!r}; registered: {', '.join(TOOLS)}")
    return bench, TOOLS[bench.tool]


def missing_reason(benchmark: str | ExternalBenchmark, settings: RunSettings | None = None) -> str | None:
    """None when the benchmark's tool can run here, else the clear skip message (nothing is run)."""
    bench, tool = tool_for(benchmark)
    return tool.missing(bench, settings or RunSettings())


def run_external(
    benchmark: str | ExternalBenchmark,
    model: str,
    out_dir: Path,
    sampling: SamplingSettings | None = None,
    settings: RunSettings | None = None,
) -> ExternalResult:
    """Run ``benchmark`` on ``model`` (a Hub id or a local HF folder) through its tool.

    ``sampling`` None: the benchmark config's (the paper's settings). Raises ToolMissing (with what to install) when
    the tool is absent, ValueError when the tool cannot generate with ``settings.backend``.
    """
    bench, tool = tool_for(benchmark)
    run = settings or RunSettings()
    if run.backend not in tool.backends:
        raise ValueError(
            f"{bench.name}: its tool ({tool.name}) generates with {' or '.join(tool.backends)}; "
            f"backend {run.backend!r} does not apply"
        )
    reason = tool.missing(bench, run)
    if reason:
        raise ToolMissing(reason)
    return tool.run(bench, model, Path(out_dir), sampling or bench.sampling, run)
