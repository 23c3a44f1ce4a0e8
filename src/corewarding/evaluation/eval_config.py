"""Compose one evaluation config per benchmark (``configs/eval.yaml``) and check its values before any work starts."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Any

from omegaconf import DictConfig, OmegaConf

from corewarding.config import ConfigError, compose_config, config_dir
from corewarding.eval_rows import SAMPLE_CHECKERS
from corewarding.schemas import BenchmarkConfig, BootstrapConfig, GenerationConfig, MathVerifyConfig, typed

METRIC_NAME = re.compile(r"^(pass|avg|maj)@([1-9][0-9]*)$")


def known_benchmarks() -> list[str]:
    return sorted(p.stem for p in (config_dir() / "benchmark").glob("*.yaml"))


def expand_benchmarks(spec: str) -> list[str]:
    """Names from a comma-separated list of benchmark and suite names (``configs/eval.yaml: suites``)."""
    suites = compose_config([], config_name="eval").suites
    known = known_benchmarks()
    names: list[str] = []
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            continue
        found = list(suites[item]) if item in suites else [item]
        for name in found:
            if name not in known:
                raise ConfigError(
                    f"--benchmarks: unknown benchmark {name!r}; known: {', '.join(known)}; suites: {', '.join(suites)}"
                )
            if name not in names:
                names.append(name)
    if not names:
        raise ConfigError("--benchmarks: no benchmark named")
    return names


def _require(key: str, value: Any, ok: bool, requirement: str) -> None:
    if not ok:
        raise ConfigError(f"{key}={value!r}: must be {requirement}")


def check_eval(cfg: DictConfig) -> None:
    """Raise ConfigError naming the first key whose value cannot work."""
    spec = typed(BenchmarkConfig, cfg.benchmark, "benchmark")
    typed(GenerationConfig, cfg.generation, "generation")
    _require("seed", cfg.seed, isinstance(cfg.seed, int), "an integer")
    _require("chunk_size", cfg.chunk_size, isinstance(cfg.chunk_size, int) and cfg.chunk_size >= 1, "an integer >= 1")
    typed(MathVerifyConfig, cfg.math_verify, "math_verify")
    typed(BootstrapConfig, cfg.bootstrap, "bootstrap")
    if spec.kind != "math":
        return
    checkers = list(cfg.checkers)
    bad = [c for c in checkers if c not in SAMPLE_CHECKERS]
    _require("checkers", checkers, bool(checkers) and not bad, f"a non-empty list of {', '.join(SAMPLE_CHECKERS)}")
    samples = 1 if spec.temperature == 0 else spec.n
    for metric in spec.metrics:
        match = METRIC_NAME.match(str(metric))
        if not match:
            raise ConfigError(f"benchmark.metrics of {spec.name}: {metric!r} is not pass@k, avg@k or maj@k")
        if int(match.group(2)) > samples:
            raise ConfigError(
                f"benchmark.metrics of {spec.name}: {metric} needs k <= the samples per problem ({samples}"
                f"{', greedy' if spec.temperature == 0 else ''}); raise benchmark.n"
            )


def configs_sha256(configs: Sequence[DictConfig]) -> str:
    """The SHA-256 of every resolved setting of these benchmark configs: what an evaluation stamp compares."""
    text = "\n".join(OmegaConf.to_yaml(c, resolve=True) for c in configs)
    return hashlib.sha256(text.encode()).hexdigest()


def benchmark_configs(names: Sequence[str], overrides: Sequence[str]) -> list[DictConfig]:
    """One checked config per benchmark, each composed with the same overrides."""
    configs = []
    for name in names:
        cfg = compose_config([f"benchmark={name}", *overrides], config_name="eval")
        check_eval(cfg)
        configs.append(cfg)
    return configs
