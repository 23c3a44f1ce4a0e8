"""Reading training rows: the verl parquet format, real upstream files, and clear errors on bad files."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from corewarding.rows import SYSTEM_PROMPT
from corewarding.training.inputs import read_rows


def test_reads_the_reference_math_parquets(shared_data: Path) -> None:
    train = read_rows(shared_data / "upstream" / "math" / "train.parquet")
    rephrased = read_rows(shared_data / "upstream" / "math" / "train_rewrite_Qwen3-32B.parquet")
    assert len(train) == len(rephrased) == 7500
    first = train[0]
    assert [m["role"] for m in first["prompt"]] == ["system", "user"]
    assert first["prompt"][0]["content"] == SYSTEM_PROMPT
    assert first["reward_model"]["ground_truth"] == "0"
    assert rephrased[0]["prompt"][1]["content"] != first["prompt"][1]["content"]
    blank = [r for r in train if not str(r["reward_model"]["ground_truth"]).strip()]
    assert len(blank) == 2  # methods.md section 3: two empty ground truths, scored as missing by gt_grpo


def test_missing_file_and_missing_column_are_named(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=re.escape("nope.parquet: no such file")):
        read_rows(tmp_path / "nope.parquet")
    bad = tmp_path / "bad.parquet"
    pd.DataFrame({"prompt": [[{"role": "user", "content": "q"}]]}).to_parquet(bad)
    with pytest.raises(ValueError, match=re.escape("bad.parquet: missing column(s) reward_model")):
        read_rows(bad)
    truncated = tmp_path / "truncated.parquet"
    truncated.write_bytes(bad.read_bytes()[:40])
    with pytest.raises(ValueError, match=re.escape(f"{truncated}: cannot read parquet")):
        read_rows(truncated)
