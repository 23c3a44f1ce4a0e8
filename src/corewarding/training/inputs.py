"""Load what a training run needs: the base model, its tokenizer, and the training/validation rows."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from corewarding.config import needs_rephrased_view
from corewarding.data.io import read_verl_rows

log = logging.getLogger(__name__)


def base_model_source(cfg: DictConfig) -> str:
    """Where ``cfg.base_model`` loads from: the locally built tiny model (built on first use), a folder, or a Hub id."""
    spec = cfg.base_model
    if spec.builder == "tiny":
        from corewarding.tiny_model import build_tiny_model

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


def load_base_model(cfg: DictConfig) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The base model and tokenizer of ``cfg.base_model``: built locally (tiny), a local folder, or a Hub id."""
    spec = cfg.base_model
    source = base_model_source(cfg)
    dtype = getattr(torch, str(spec.dtype))
    if cfg.device == "cpu" and dtype == torch.bfloat16:
        log.warning("bfloat16 on CPU is slow; loading %s in float32", source)
        dtype = torch.float32
    tokenizer = load_tokenizer(source)
    model = AutoModelForCausalLM.from_pretrained(source, dtype=dtype).to(cfg.device)
    return model, tokenizer


@dataclass
class TrainingRows:
    """Training rows (verl format), their aligned rephrasings when the method needs them, validation rows."""

    train: list[dict[str, Any]]
    rephrased: list[dict[str, Any]] | None
    val: list[dict[str, Any]]
    dropped: dict[str, int] = field(default_factory=dict)
    prompt_filter: dict[str, Any] = field(default_factory=dict)  # the tokenizer and limit that dropped long prompts


def read_rows(path: Path) -> list[dict[str, Any]]:
    """Read a verl-format parquet; a missing file or column is an error naming it."""
    return read_verl_rows(path)


def _ensure_tiny_data(cfg: DictConfig) -> None:
    if cfg.dataset.name == "tiny":
        from corewarding.data.tiny import write_tiny_dataset

        write_tiny_dataset(Path(cfg.dataset.train_files).parent, **dict(cfg.dataset.tiny))


def _prompt_tokens(tokenizer: PreTrainedTokenizerBase, row: dict[str, Any]) -> int:
    ids = tokenizer.apply_chat_template(row["prompt"], add_generation_prompt=True, tokenize=True)
    if isinstance(ids, dict) or hasattr(ids, "keys"):
        ids = ids["input_ids"]
    return len(ids)


def prompt_length_tokenizer(cfg: DictConfig) -> str | None:
    """The tokenizer that counts a cell's prompt lengths: its own base model's (a local folder or Hub id), as
    verl's ``filter_overlong_prompts`` in the reference uses the actor's; None when the filter is off.

    >>> from omegaconf import OmegaConf
    >>> llama = {"path": None, "hf_id": "meta-llama/Llama-3.2-3B-Instruct"}
    >>> prompt_length_tokenizer(OmegaConf.create({"grpo": {"filter_overlong_prompts": True}, "base_model": llama}))
    'meta-llama/Llama-3.2-3B-Instruct'
    """
    if not cfg.grpo.filter_overlong_prompts:
        return None
    return str(cfg.base_model.path or cfg.base_model.hf_id)


def load_training_rows(cfg: DictConfig, tokenizer: PreTrainedTokenizerBase) -> TrainingRows:
    """Rows for ``cfg``; prompts over ``grpo.max_prompt_length`` tokens are dropped (both views of a pair together)."""
    _ensure_tiny_data(cfg)
    train_on = cfg.method.get("train_on", "original")
    needs_pairs = needs_rephrased_view(cfg)
    # Paired methods read the aligned originals (rephrasing may have dropped pairs); the others the whole set.
    train_path = Path(cfg.dataset.original_files if needs_pairs else cfg.dataset.train_files)
    train = read_rows(train_path)
    rephrased = read_rows(Path(cfg.dataset.rephrased_files)) if needs_pairs else None
    if rephrased is not None and len(rephrased) != len(train):
        raise ValueError(f"{cfg.dataset.rephrased_files}: {len(rephrased)} rows, but {train_path} has {len(train)}")
    if train_on == "rephrased":
        assert rephrased is not None
        train, rephrased = rephrased, None
    val = read_rows(Path(cfg.dataset.val_files))
    if cfg.schedule.val_max_samples:
        val = val[: int(cfg.schedule.val_max_samples)]
    dropped = {"prompt_too_long": 0}
    if cfg.grpo.filter_overlong_prompts:
        limit = int(cfg.grpo.max_prompt_length)
        views = [train] + ([rephrased] if rephrased is not None else [])
        keep = [i for i in range(len(train)) if all(_prompt_tokens(tokenizer, v[i]) <= limit for v in views)]
        dropped["prompt_too_long"] = len(train) - len(keep)
        train = [train[i] for i in keep]
        rephrased = [rephrased[i] for i in keep] if rephrased is not None else None
    if dropped["prompt_too_long"]:
        log.warning("dropped %d training rows with prompts over %d tokens", dropped["prompt_too_long"], limit)
    prompt_filter = {"tokenizer": prompt_length_tokenizer(cfg), "max_prompt_length": int(cfg.grpo.max_prompt_length)}
    return TrainingRows(train, rephrased, val, dropped, prompt_filter)
