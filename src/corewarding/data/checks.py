"""Check the data pipeline's config values before anything is read or generated; errors name the key (the checks
every data command runs first)."""

from __future__ import annotations

from omegaconf import DictConfig

from corewarding.config import ConfigError
from corewarding.data.quality import DROP_REASONS
from corewarding.schemas import RephraseConfig, ValidateConfig, section_of


def check_validate(cfg: DictConfig) -> ValidateConfig:
    """``validate.*`` (``schemas.ValidateConfig``): known drop reasons and a positive token limit."""
    validate = section_of(cfg, ValidateConfig)
    for key in ("drop", "drop_eval"):
        reasons = getattr(validate, key)
        unknown = sorted(set(reasons) - set(DROP_REASONS))
        if unknown:
            raise ConfigError(
                f"validate.{key}={list(reasons)!r}: must be a list of {', '.join(DROP_REASONS)} "
                f"(unknown: {', '.join(unknown)})"
            )
    return validate


# What a rephraser that generates must set (an import's, backend none, sets none of them)
GENERATION_KEYS = {
    "model": "a Hub id, a local folder or base_model",
    "batch_size": ">= 1",
    "temperature": "> 0",
    "top_p": "in (0, 1]",
    "max_new_tokens": ">= 1",
}


def check_rephrase(cfg: DictConfig, generating: bool) -> RephraseConfig:
    """``rephrase.*`` (``schemas.RephraseConfig``: failure handling, check actions, ranges) and, when generating, a
    generating backend with its sampling settings."""
    spec = section_of(cfg, RephraseConfig)
    if not generating:
        return spec
    if spec.backend not in ("transformers", "vllm"):
        raise ConfigError(f"rephrase.backend={spec.backend!r}: must be transformers or vllm")
    for key, requirement in GENERATION_KEYS.items():
        if not getattr(spec, key):
            raise ConfigError(f"rephrase.{key}={getattr(spec, key)!r}: must be {requirement}")
    return spec
