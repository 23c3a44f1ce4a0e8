"""Tests for the tiny arithmetic data set, the verl row schema and the tiny local Qwen2 model."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import torch
from safetensors.torch import load_file

from corewarding.rows import (
    DATA_SOURCE,
    SYSTEM_PROMPT,
    ground_truth_of,
    make_row,
    question_of,
)
from corewarding.tiny.data import make_tiny_dataset, write_tiny_dataset
from corewarding.tiny.model import (
    MARKER_NAME,
    build_tiny_model,
    evaluate_tiny_model,
)

_INT = re.compile(r"\d+")


# ----------------------------------------------------------------------------------------------- data set


def test_schema_make_row_and_accessors() -> None:
    row = make_row("What is 1 + 2?", "3", 5, "train", level="Level 1")
    assert row == {
        "data_source": DATA_SOURCE,
        "prompt": [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": "What is 1 + 2?"},
        ],
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": "3"},
        "extra_info": {"index": 5, "split": "train", "level": "Level 1"},
    }
    assert question_of(row) == "What is 1 + 2?"
    assert ground_truth_of(row) == "3"
    assert ground_truth_of(make_row("q", None, 0, "train")) is None
    assert SYSTEM_PROMPT == "Let's think step by step and output the final answer within \\boxed{}."


def test_dataset_is_deterministic() -> None:
    assert make_tiny_dataset(seed=3) == make_tiny_dataset(seed=3)
    assert make_tiny_dataset(seed=3).train != make_tiny_dataset(seed=4).train


def test_dataset_sizes_and_row_schema() -> None:
    data = make_tiny_dataset(n_train=40, n_test=10, seed=1)
    assert (len(data.train), len(data.train_rephrased), len(data.test)) == (40, 40, 10)
    for split, rows in (("train", data.train), ("train", data.train_rephrased), ("test", data.test)):
        for i, row in enumerate(rows):
            assert set(row) == {"data_source", "prompt", "ability", "reward_model", "extra_info"}
            assert row["data_source"] == DATA_SOURCE
            assert row["ability"] == "math"
            assert [m["role"] for m in row["prompt"]] == ["system", "user"]
            assert row["prompt"][0]["content"] == SYSTEM_PROMPT
            assert row["reward_model"]["style"] == "rule"
            gt = row["reward_model"]["ground_truth"]
            assert isinstance(gt, str) and re.fullmatch(r"\d+", gt)
            assert row["extra_info"] == {"index": i, "split": split}


def test_ground_truths_are_correct() -> None:
    data = make_tiny_dataset(seed=2)
    for row, problem in zip(data.train, data.train_problems, strict=True):
        assert ground_truth_of(row) == str(problem.answer)
        a, b = problem.a, problem.b
        assert sorted(_INT.findall(question_of(row))) == sorted([str(a), str(b)])
        assert {"+": a + b, "-": a - b, "*": a * b}[problem.op] == problem.answer >= 0
        assert 1 <= a <= 99 and 1 <= b <= 99


def test_rephrasings_are_aligned() -> None:
    data = make_tiny_dataset(seed=0)
    for original, rephrased in zip(data.train, data.train_rephrased, strict=True):
        assert ground_truth_of(original) == ground_truth_of(rephrased)
        assert original["extra_info"] == rephrased["extra_info"]
        assert question_of(original) != question_of(rephrased)
        assert sorted(_INT.findall(question_of(original))) == sorted(_INT.findall(question_of(rephrased)))
    assert len({question_of(r) for r in data.train_rephrased}) == len(data.train_rephrased)


def test_no_train_test_overlap() -> None:
    data = make_tiny_dataset(n_train=200, n_test=50, seed=7)
    train_keys = {p.key() for p in data.train_problems}
    test_keys = {p.key() for p in data.test_problems}
    assert len(train_keys) == 200 and len(test_keys) == 50 and not train_keys & test_keys
    train_text = {question_of(r) for r in data.train + data.train_rephrased}
    assert not train_text & {question_of(r) for r in data.test}


def test_write_tiny_dataset_roundtrip(tmp_path: Path) -> None:
    paths = write_tiny_dataset(tmp_path / "tiny", n_train=8, n_test=4, seed=0)
    assert set(paths) == {"train", "train_rephrased", "test"}
    assert sorted(p.name for p in (tmp_path / "tiny").iterdir()) == [
        "test.parquet",
        "train.parquet",
        "train_rephrased.parquet",
    ]
    data = make_tiny_dataset(n_train=8, n_test=4, seed=0)
    for name, path in paths.items():
        frame = pd.read_parquet(path)
        expected = getattr(data, name)
        assert len(frame) == len(expected)
        for (_, row), want in zip(frame.iterrows(), expected, strict=True):
            assert question_of(row) == question_of(want)
            assert ground_truth_of(row) == ground_truth_of(want)
            assert row["prompt"][0]["role"] == "system"
            assert row["extra_info"]["split"] == want["extra_info"]["split"]


# -------------------------------------------------------------------------------------------- tiny model


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture(scope="session")
def tiny(tiny_model_dir: Path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoModelForCausalLM.from_pretrained(tiny_model_dir), AutoTokenizer.from_pretrained(tiny_model_dir)


def test_model_reloads_offline_in_fresh_process(tiny_model_dir: Path, tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from transformers import AutoModelForCausalLM, AutoTokenizer\n"
        "m = AutoModelForCausalLM.from_pretrained(sys.argv[1])\n"
        "t = AutoTokenizer.from_pretrained(sys.argv[1])\n"
        "print(type(m).__name__, t.eos_token, t.pad_token, t.padding_side)\n"
    )
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_HOME": str(tmp_path / "hf_home"),
        "TRANSFORMERS_VERBOSITY": "error",
    }
    result = subprocess.run(
        [sys.executable, "-c", code, str(tiny_model_dir)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["Qwen2ForCausalLM", "<|im_end|>", "<|pad|>", "left"]


def test_model_config_and_special_ids(tiny) -> None:
    model, tokenizer = tiny
    config = model.config
    assert config.model_type == "qwen2"
    assert (config.hidden_size, config.num_hidden_layers, config.num_attention_heads) == (64, 2, 4)
    assert config.intermediate_size == 256 and config.max_position_embeddings == 512
    assert config.tie_word_embeddings
    assert len(tokenizer) <= config.vocab_size == 1024
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    pad = tokenizer.convert_tokens_to_ids("<|pad|>")
    assert tokenizer.eos_token_id == config.eos_token_id == model.generation_config.eos_token_id == im_end
    assert tokenizer.pad_token_id == config.pad_token_id == model.generation_config.pad_token_id == pad
    assert config.bos_token_id == tokenizer.convert_tokens_to_ids("<|endoftext|>")
    assert sum(p.numel() for p in model.parameters()) < 400_000
    marker = json.loads((Path(model.name_or_path) / MARKER_NAME).read_text())
    assert marker["sft_steps"] == 0 and marker["hidden_size"] == 64


def test_tokenizer_specials_roundtrip(tiny) -> None:
    _, tokenizer = tiny
    text = "<|im_start|>user\nWhat is 12 + 7?<|im_end|>\n"
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert ids[0] == tokenizer.convert_tokens_to_ids("<|im_start|>")
    assert tokenizer.convert_tokens_to_ids("<|im_end|>") in ids
    assert tokenizer.decode(ids) == text
    # digits are single tokens
    assert tokenizer.tokenize("12345")[:5] == ["1", "2", "3", "4", "5"]


def test_chat_template(tiny) -> None:
    _, tokenizer = tiny
    row = make_tiny_dataset().train[0]
    text = tokenizer.apply_chat_template(row["prompt"], add_generation_prompt=True, tokenize=False)
    assert text == (
        f"<|im_start|>system\n{SYSTEM_PROMPT}<|im_end|>\n"
        f"<|im_start|>user\n{question_of(row)}<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    no_gen = tokenizer.apply_chat_template(row["prompt"], add_generation_prompt=False, tokenize=False)
    assert no_gen == text.removesuffix("<|im_start|>assistant\n")


def test_left_padding(tiny) -> None:
    _, tokenizer = tiny
    assert tokenizer.padding_side == "left"
    batch = tokenizer(["What is 1 + 2?", "Find the product of 12 and 9, please."], padding=True, return_tensors="pt")
    short_mask = batch["attention_mask"][0]
    assert short_mask[0] == 0 and short_mask[-1] == 1
    assert batch["input_ids"][0, 0] == tokenizer.pad_token_id
    assert batch["attention_mask"][1].all()


def test_generate_smoke(tiny) -> None:
    model, tokenizer = tiny
    rows = make_tiny_dataset().train[:2]
    prompts = [tokenizer.apply_chat_template(r["prompt"], add_generation_prompt=True, tokenize=False) for r in rows]
    encoded = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    torch.manual_seed(0)
    with torch.no_grad():
        out = model.generate(**encoded, do_sample=True, max_new_tokens=16, num_return_sequences=8)
    width = encoded["input_ids"].shape[1]
    assert out.shape[0] == 16 and width < out.shape[1] <= width + 16
    texts = tokenizer.batch_decode(out[:, width:], skip_special_tokens=True)
    assert len(texts) == 16 and all(isinstance(t, str) for t in texts)


def test_evaluate_tiny_model(tiny_model_dir: Path) -> None:
    stats = evaluate_tiny_model(tiny_model_dir, make_tiny_dataset().test[:2], samples_per_prompt=2, max_new_tokens=8)
    assert stats["n"] == 4 and 0.0 <= stats["accuracy"] <= stats["boxed_rate"] <= 1.0


def test_marker_cache_skips_rebuild(tiny_model_dir: Path) -> None:
    weights = tiny_model_dir / "model.safetensors"
    before = weights.stat().st_mtime_ns, weights.stat().st_ino
    started = time.perf_counter()
    assert build_tiny_model(tiny_model_dir) == tiny_model_dir
    assert time.perf_counter() - started < 0.5
    assert (weights.stat().st_mtime_ns, weights.stat().st_ino) == before


def test_build_is_deterministic(tiny_model_dir: Path, tmp_path: Path) -> None:
    again = build_tiny_model(tmp_path / "again")
    first, second = load_file(tiny_model_dir / "model.safetensors"), load_file(again / "model.safetensors")
    assert first.keys() == second.keys()
    assert all(torch.equal(first[k], second[k]) for k in first)
    assert (tiny_model_dir / "tokenizer.json").read_bytes() == (again / "tokenizer.json").read_bytes()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".again.") and p.is_dir()]


def test_changed_params_rebuild_and_sft_is_deterministic(tiny_model_dir: Path, tmp_path: Path) -> None:
    copy = tmp_path / "model"
    shutil.copytree(tiny_model_dir, copy)
    assert build_tiny_model(copy, sft_steps=3) == copy
    assert json.loads((copy / MARKER_NAME).read_text())["sft_steps"] == 3
    base, tuned = load_file(tiny_model_dir / "model.safetensors"), load_file(copy / "model.safetensors")
    assert any(not torch.equal(base[k], tuned[k]) for k in base)
    fresh = build_tiny_model(tmp_path / "fresh", sft_steps=3)
    again = load_file(fresh / "model.safetensors")
    assert all(torch.equal(tuned[k], again[k]) for k in tuned)
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith(".") and p.is_dir()]
    assert leftovers == []
