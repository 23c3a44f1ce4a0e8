"""What a training run reads: the training rows, their aligned rephrasings, the validation rows."""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig
from transformers import PreTrainedTokenizerBase

from corewarding.config import needs_rephrased_view
from corewarding.rows import read_verl_rows
from corewarding.schemas import BaseModelConfig, DatasetConfig, GrpoConfig, MethodConfig, ScheduleConfig, section_of
from corewarding.tiny.data import write_tiny_dataset

log = logging.getLogger(__name__)


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
    dataset = section_of(cfg, DatasetConfig)
    if dataset.name == "tiny":
        assert dataset.tiny is not None, "dataset.tiny: the generated set's size"
        write_tiny_dataset(Path(dataset.train_files).parent, **asdict(dataset.tiny))


def _prompt_tokens(tokenizer: PreTrainedTokenizerBase, row: dict[str, Any]) -> int:
    ids: Any = tokenizer.apply_chat_template(row["prompt"], add_generation_prompt=True, tokenize=True)
    if isinstance(ids, dict) or hasattr(ids, "keys"):
        ids = ids["input_ids"]
    return len(ids)


def prompt_length_tokenizer(cfg: DictConfig) -> str | None:
    """The tokenizer that counts a cell's prompt lengths: its own base model's (a local folder or Hub id), as
    verl's ``filter_overlong_prompts`` in the reference uses the actor's; None when the filter is off.

    >>> from corewarding.config import compose_config
    >>> prompt_length_tokenizer(compose_config(["base_model=llama-3.2-3b-instruct"]))
    'meta-llama/Llama-3.2-3B-Instruct'
    """
    if not section_of(cfg, GrpoConfig).filter_overlong_prompts:
        return None
    model = section_of(cfg, BaseModelConfig)
    return str(model.path or model.hf_id)


def load_training_rows(cfg: DictConfig, tokenizer: PreTrainedTokenizerBase) -> TrainingRows:
    """Rows for ``cfg``; prompts over ``grpo.max_prompt_length`` tokens are dropped (both views of a pair together)."""
    _ensure_tiny_data(cfg)
    dataset, grpo = section_of(cfg, DatasetConfig), section_of(cfg, GrpoConfig)
    needs_pairs = needs_rephrased_view(cfg)
    # Paired methods read the aligned originals (rephrasing may have dropped pairs); the others the whole set.
    train_path = Path(dataset.original_files if needs_pairs else dataset.train_files)
    train = read_rows(train_path)
    rephrased = read_rows(Path(dataset.rephrased_files)) if needs_pairs else None
    if rephrased is not None and len(rephrased) != len(train):
        raise ValueError(f"{dataset.rephrased_files}: {len(rephrased)} rows, but {train_path} has {len(train)}")
    if section_of(cfg, MethodConfig).train_on == "rephrased":
        assert rephrased is not None
        train, rephrased = rephrased, None
    val = read_rows(Path(dataset.val_files))
    cap = section_of(cfg, ScheduleConfig).val_max_samples
    if cap:
        val = val[:cap]
    dropped = {"prompt_too_long": 0}
    limit = grpo.max_prompt_length
    if grpo.filter_overlong_prompts:
        views = [train] + ([rephrased] if rephrased is not None else [])
        keep = [i for i in range(len(train)) if all(_prompt_tokens(tokenizer, v[i]) <= limit for v in views)]
        dropped["prompt_too_long"] = len(train) - len(keep)
        train = [train[i] for i in keep]
        rephrased = [rephrased[i] for i in keep] if rephrased is not None else None
    if dropped["prompt_too_long"]:
        log.warning("dropped %d training rows with prompts over %d tokens", dropped["prompt_too_long"], limit)
    prompt_filter = {"tokenizer": prompt_length_tokenizer(cfg), "max_prompt_length": limit}
    return TrainingRows(train, rephrased, val, dropped, prompt_filter)
