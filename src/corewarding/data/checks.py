"""Check the data pipeline's config values before anything is read or generated; errors name the key (the checks
every data command runs first)."""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from corewarding.config import ConfigError
from corewarding.data.quality import DROP_REASONS

ON_FAILURE = ("keep_original", "drop")
CHECK_ACTIONS = ("reject", "flag", "off")
BACKENDS = ("transformers", "vllm", "none")


def _require(key: str, ok: bool, requirement: str, cfg: DictConfig) -> None:
    if not ok:
        raise ConfigError(f"{key}={OmegaConf.select(cfg, key)!r}: must be {requirement}")


def check_validate(cfg: DictConfig) -> None:
    """``validate.*``: known drop reasons and a positive token limit."""
    for key in ("validate.drop", "validate.drop_eval"):
        reasons = OmegaConf.select(cfg, key) or []
        unknown = sorted(set(reasons) - set(DROP_REASONS))
        _require(key, not unknown, f"a list of {', '.join(DROP_REASONS)} (unknown: {', '.join(unknown)})", cfg)
    limit = OmegaConf.select(cfg, "validate.max_prompt_tokens")
    _require("validate.max_prompt_tokens", isinstance(limit, int) and limit >= 1, "an integer >= 1", cfg)


def check_rephrase(cfg: DictConfig, generating: bool) -> None:
    """``rephrase.*``: failure handling, check actions, and (when generating) the sampling settings."""
    spec = cfg.rephrase
    _require("rephrase.on_failure", spec.on_failure in ON_FAILURE, f"one of {', '.join(ON_FAILURE)}", cfg)
    for name in ("placeholder", "unchanged", "numbers"):
        action = OmegaConf.select(cfg, f"rephrase.checks.{name}.action")
        _require(f"rephrase.checks.{name}.action", action in CHECK_ACTIONS, f"one of {', '.join(CHECK_ACTIONS)}", cfg)
    fraction = OmegaConf.select(cfg, "rephrase.checks.numbers.min_kept_fraction")
    _require("rephrase.checks.numbers.min_kept_fraction", 0 <= float(fraction) <= 1, "in [0, 1]", cfg)
    _require("rephrase.max_retries", int(spec.max_retries) >= 0, ">= 0", cfg)
    if not generating:
        return
    _require("rephrase.backend", spec.backend in BACKENDS[:2], "transformers or vllm", cfg)
    _require("rephrase.model", bool(spec.model), "a Hub id, a local folder or base_model", cfg)
    _require("rephrase.batch_size", int(spec.batch_size) >= 1, ">= 1", cfg)
    _require("rephrase.temperature", float(spec.temperature) > 0, "> 0", cfg)
    _require("rephrase.top_p", 0 < float(spec.top_p) <= 1, "in (0, 1]", cfg)
    _require("rephrase.max_new_tokens", int(spec.max_new_tokens) >= 1, ">= 1", cfg)
