"""The verl run's input files and the pair sampler.

Rows are filtered exactly as the local backend filters them (``training.inputs.load_training_rows``: prompts over
``grpo.max_prompt_length`` dropped, both views of a pair together) and written as verl-format parquet under
``{run_dir}/verl_data/``. Every row's ``extra_info`` gains ``cr_view`` and ``cr_pair`` (the row's question index),
which the reward hook reads. For Co-rewarding-I row ``2i`` is question ``i``'s original view and ``2i+1`` its
rephrasing, and ``PairedRandomSampler`` keeps the two in one batch.

Data order equals the local backend's: verl's own sampler (torchdata ``RandomSampler`` seeded with ``data.seed``)
draws one permutation per epoch from one generator, which is ``local.batch_indices``; the pair sampler draws the
same permutation over questions.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from torch.utils.data import Sampler
from torchdata.stateful_dataloader.sampler import RandomSampler

from corewarding.training.inputs import TrainingRows

TRAIN_FILE = "train.parquet"
VAL_FILE = "val.parquet"


def _tagged(row: dict[str, Any], view: str, pair: int) -> dict[str, Any]:
    extra = dict(row.get("extra_info") or {})
    extra.update(cr_view=view, cr_pair=pair)
    return {**row, "extra_info": extra}


def verl_rows(rows: TrainingRows, pairs: bool) -> list[dict[str, Any]]:
    """Training rows in verl order: one row per question, or original/rephrased interleaved for pairs."""
    if not pairs:
        return [_tagged(r, "original", i) for i, r in enumerate(rows.train)]
    if rows.rephrased is None:
        raise ValueError("Co-rewarding-I needs rephrased rows (dataset.rephrased_files)")
    out: list[dict[str, Any]] = []
    for i, (orig, reph) in enumerate(zip(rows.train, rows.rephrased, strict=True)):
        out += [_tagged(orig, "original", i), _tagged(reph, "rephrased", i)]
    return out


def write_parquet_atomic(rows: list[dict[str, Any]], path: Path) -> None:
    """Write rows to ``path`` through a temporary file in the same folder (no half-written file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    os.close(fd)
    try:
        pd.DataFrame(rows).to_parquet(tmp, index=False)
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)


def write_verl_inputs(rows: TrainingRows, out_dir: Path, pairs: bool) -> dict[str, Path]:
    """Write ``train.parquet`` and ``val.parquet`` for verl; returns their paths."""
    train, val = out_dir / TRAIN_FILE, out_dir / VAL_FILE
    write_parquet_atomic(verl_rows(rows, pairs), train)
    write_parquet_atomic([_tagged(r, "original", i) for i, r in enumerate(rows.val)], val)
    return {"train": train, "val": val}


class _PairIterator(Iterator[int]):
    """Yields 2p, 2p+1 for each pair p of an inner stateful random-sampler iterator; stateful for resumption."""

    def __init__(self, inner: Iterator[int]) -> None:
        self.inner = inner
        self.pending: int | None = None

    def __iter__(self) -> _PairIterator:
        return self

    def __next__(self) -> int:
        if self.pending is not None:
            value, self.pending = self.pending, None
            return value
        pair = next(self.inner)
        self.pending = 2 * pair + 1
        return 2 * pair

    def state_dict(self) -> dict[str, Any]:
        return {"inner": self.inner.state_dict(), "pending": self.pending}  # type: ignore[attr-defined]  # stateful

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.inner.load_state_dict(state["inner"])  # type: ignore[attr-defined]  # a stateful sampler's iterator has it
        self.pending = state["pending"]


class PairedRandomSampler(Sampler[int]):
    """A seeded random order over pairs (rows 2p, 2p+1), one permutation per epoch, as verl's own sampler draws."""

    def __init__(self, n_rows: int, seed: int) -> None:
        if n_rows % 2:
            raise ValueError(f"a paired dataset has an even number of rows, got {n_rows}")
        self.n_pairs = n_rows // 2
        self.pairs = RandomSampler(range(self.n_pairs), generator=torch.Generator().manual_seed(seed))

    def __iter__(self) -> Iterator[int]:
        return _PairIterator(iter(self.pairs))

    def __len__(self) -> int:
        return 2 * self.n_pairs
