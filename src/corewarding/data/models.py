"""Tokenizers and models the data pipeline names in config: ``base_model`` (the tiny one), a folder or a Hub id."""

from __future__ import annotations

from omegaconf import DictConfig
from transformers import PreTrainedTokenizerBase

from corewarding.files import SourceError


def resolve_model_source(name: str, cfg: DictConfig) -> str:
    """A loadable model source: ``base_model`` means cfg.base_model (the tiny one is built here if missing)."""
    if name != "base_model":
        return name
    from corewarding.lm.loading import base_model_source  # torch: imported when used

    return base_model_source(cfg)


def load_tokenizer(name: str, cfg: DictConfig) -> PreTrainedTokenizerBase:
    """Load a tokenizer by config name; a failure names it and says how to skip the check."""
    from corewarding.lm.loading import (
        load_tokenizer as load_base_tokenizer,  # torch: imported when used
    )

    source = resolve_model_source(name, cfg)
    try:
        return load_base_tokenizer(source)
    except (OSError, ValueError) as exc:
        raise SourceError(
            f"datasource.tokenizer={name!r}: cannot load tokenizer {source} ({exc}); "
            "set datasource.tokenizer=null to skip the prompt-length check"
        ) from exc
