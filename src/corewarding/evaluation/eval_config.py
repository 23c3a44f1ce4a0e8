"""Compose one evaluation config per benchmark (``configs/eval.yaml``) and check its values before any work starts."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Any

from omegaconf import DictConfig, OmegaConf

from corewarding.config import ConfigError, compose_config, config_dir
from corewarding.evaluation.scoring import CHECKERS
from corewarding.schemas import BootstrapConfig, MathVerifyConfig, typed

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


def _require(cfg: DictConfig, key: str, ok: bool, requirement: str) -> None:
    if not ok:
        raise ConfigError(f"{key}={OmegaConf.select(cfg, key)!r}: must be {requirement}")


def check_eval(cfg: DictConfig) -> None:
    """Raise ConfigError naming the first key whose value cannot work."""
    spec = cfg.benchmark
    name = spec.name
    _require(cfg, "benchmark.kind", spec.kind in ("math", "external"), "math or external")
    _require(cfg, "benchmark.n", isinstance(spec.n, int) and spec.n >= 1, "an integer >= 1")
    _require(cfg, "benchmark.temperature", _number(spec.temperature) and spec.temperature >= 0, ">= 0 (0: greedy)")
    _require(cfg, "benchmark.top_p", _number(spec.top_p) and 0 < spec.top_p <= 1, "in (0, 1]")
    _require(cfg, "benchmark.max_new_tokens", isinstance(spec.max_new_tokens, int) and spec.max_new_tokens >= 1, ">= 1")
    _require(
        cfg, "benchmark.limit", spec.limit is None or (isinstance(spec.limit, int) and spec.limit >= 1), ">= 1 or null"
    )
    _require(cfg, "generation.backend", cfg.generation.backend in ("transformers", "vllm"), "transformers or vllm")
    _require(cfg, "seed", isinstance(cfg.seed, int), "an integer")
    _require(cfg, "chunk_size", isinstance(cfg.chunk_size, int) and cfg.chunk_size >= 1, "an integer >= 1")
    typed(MathVerifyConfig, cfg.math_verify, "math_verify")
    typed(BootstrapConfig, cfg.bootstrap, "bootstrap")
    if spec.kind != "math":
        return
    bad = [c for c in cfg.checkers if c not in CHECKERS]
    _require(cfg, "checkers", bool(cfg.checkers) and not bad, f"a non-empty list of {', '.join(CHECKERS)}")
    samples = 1 if spec.temperature == 0 else spec.n
    for metric in spec.metrics:
        match = METRIC_NAME.match(str(metric))
        if not match:
            raise ConfigError(f"benchmark.metrics of {name}: {metric!r} is not pass@k, avg@k or maj@k")
        if int(match.group(2)) > samples:
            raise ConfigError(
                f"benchmark.metrics of {name}: {metric} needs k <= the samples per problem ({samples}"
                f"{', greedy' if spec.temperature == 0 else ''}); raise benchmark.n"
            )


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


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
