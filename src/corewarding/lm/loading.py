"""Load a base model and its tokenizer: the locally built tiny model, a local folder, or a Hub id."""

from __future__ import annotations

import logging
from pathlib import Path

import torch
from omegaconf import DictConfig
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from corewarding.tiny.model import build_tiny_model

log = logging.getLogger(__name__)


def base_model_source(cfg: DictConfig) -> str:
    """Where ``cfg.base_model`` loads from: the locally built tiny model (built on first use), a folder, or a Hub id."""
    spec = cfg.base_model
    if spec.builder == "tiny":
        return str(build_tiny_model(Path(spec.path), **dict(spec.tiny)))
    if spec.builder is None:
        return str(spec.path or spec.hf_id)
    raise ValueError(f"base_model.builder={spec.builder!r}; expected tiny or null")


def load_tokenizer(source: str) -> PreTrainedTokenizerBase:
    """The tokenizer of a base model, left-padded, with a pad token."""
    tokenizer = AutoTokenizer.from_pretrained(source, padding_side="left")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_dtype(name: str, device: str, source: str) -> torch.dtype:
    """The torch dtype ``name`` to load ``source`` in on ``device``; bfloat16 on CPU is slow, so float32 there."""
    dtype = getattr(torch, name)
    if device == "cpu" and dtype == torch.bfloat16:
        log.warning("bfloat16 on CPU is slow; loading %s in float32", source)
        return torch.float32
    return dtype


def load_base_model(cfg: DictConfig) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The base model and tokenizer of ``cfg.base_model``: built locally (tiny), a local folder, or a Hub id."""
    spec = cfg.base_model
    source = base_model_source(cfg)
    dtype = load_dtype(str(spec.dtype), str(cfg.device), source)
    tokenizer = load_tokenizer(source)
    model = AutoModelForCausalLM.from_pretrained(source, dtype=dtype).to(cfg.device)
    return model, tokenizer
