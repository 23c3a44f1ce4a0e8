"""A tiny random-weight Qwen2-style causal LM and a byte-level BPE tokenizer, built locally for CPU tests.

Nothing is downloaded: the tokenizer is trained on text generated from the tiny arithmetic data set, the model
is initialised from a seed, and optionally a few supervised steps teach it the ``\\boxed{}`` answer format.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import torch

from corewarding.files import open_lock_file
from corewarding.grading.answers import last_boxed_only_string, strict_score
from corewarding.rows import SYSTEM_PROMPT, ground_truth_of
from corewarding.tiny.data import TinyDataset, make_tiny_dataset

logger = logging.getLogger(__name__)

MARKER_NAME = "corewarding_tiny.json"
# Bump when the build recipe changes so cached builds are rebuilt.
BUILD_VERSION = 1
# SFT step count recommended for tests that need a model with visible but imperfect accuracy.
DEFAULT_SFT_STEPS = 300

IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
ENDOFTEXT = "<|endoftext|>"
PAD = "<|pad|>"
SPECIAL_TOKENS: tuple[str, ...] = (ENDOFTEXT, IM_START, IM_END, PAD)

CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{%- endif %}"
)

# Qwen2-style split: contractions, letter runs, single digits, punctuation runs, whitespace.
PRETOKENIZE_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)


def _chatml(messages: Sequence[dict[str, str]], add_generation_prompt: bool = False) -> str:
    """Render messages exactly as ``CHAT_TEMPLATE`` does (used for the tokenizer corpus)."""
    text = "".join(f"{IM_START}{m['role']}\n{m['content']}{IM_END}\n" for m in messages)
    return text + (f"{IM_START}assistant\n" if add_generation_prompt else "")


def _corpus(dataset: TinyDataset) -> Iterator[str]:
    """Texts the BPE tokenizer is trained on: prompts, rephrasings, answers, digits and ChatML turns."""
    yield SYSTEM_PROMPT
    yield " ".join("0123456789") + " 0123456789 + - * = \\times \\boxed{} { } . ? ,"
    rows = [*dataset.train, *dataset.train_rephrased, *dataset.test]
    problems = [*dataset.train_problems, *dataset.train_problems, *dataset.test_problems]
    for row, problem in zip(rows, problems, strict=True):
        yield row["prompt"][1]["content"]
        yield problem.solution
        yield f"The answer is \\boxed{{{problem.answer}}}."
        yield _chatml([*row["prompt"], {"role": "assistant", "content": problem.solution}])


def _train_tokenizer(dataset: TinyDataset, vocab_size: int) -> Any:
    """Train a byte-level BPE tokenizer (digits split individually) and wrap it for transformers."""
    from tokenizers import (  # tokenizers: imported when used
        Regex,
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        trainers,
    )
    from transformers import PreTrainedTokenizerFast  # transformers: imported when used

    backend = Tokenizer(models.BPE())
    # The same normaliser and pre-tokeniser as Qwen2, which AutoTokenizer uses when reloading (qwen2 config).
    backend.normalizer = normalizers.NFC()
    backend.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PRETOKENIZE_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    backend.train_from_iterator(list(_corpus(dataset)), trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        eos_token=IM_END,
        pad_token=PAD,
        unk_token=None,
        bos_token=None,
        additional_special_tokens=[IM_START, ENDOFTEXT],
        padding_side="left",
        model_max_length=512,
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


ARCHITECTURES = ("qwen2", "qwen3")


def _build_model(
    tokenizer: Any,
    seed: int,
    hidden_size: int,
    num_layers: int,
    num_heads: int,
    vocab_size: int,
    architecture: str = "qwen2",
    head_dim: int | None = None,
) -> Any:
    """Create a seeded random-weight ``Qwen2ForCausalLM`` (or ``Qwen3ForCausalLM``, the architecture verl's CPU
    end-to-end run serves with vLLM) whose special ids match the tokenizer."""
    from transformers import (  # transformers: imported when used
        GenerationConfig,
        Qwen2Config,
        Qwen2ForCausalLM,
        Qwen3Config,
        Qwen3ForCausalLM,
    )

    if architecture not in ARCHITECTURES:
        raise ValueError(f"tiny architecture {architecture!r}: must be one of {', '.join(ARCHITECTURES)}")

    if len(tokenizer) > vocab_size:
        raise ValueError(f"tokenizer has {len(tokenizer)} tokens, more than vocab_size={vocab_size}")
    eos_id = tokenizer.convert_tokens_to_ids(IM_END)
    pad_id = tokenizer.convert_tokens_to_ids(PAD)
    bos_id = tokenizer.convert_tokens_to_ids(ENDOFTEXT)
    qwen3 = architecture == "qwen3"
    config_cls, model_cls = (Qwen3Config, Qwen3ForCausalLM) if qwen3 else (Qwen2Config, Qwen2ForCausalLM)
    # vLLM's CPU attention refuses head_dim 16 (hidden 64 / 4 heads): the vLLM model sets it
    extra: dict[str, Any] = {} if head_dim is None else {"head_dim": head_dim}
    config = config_cls(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        intermediate_size=4 * hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_heads,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        bos_token_id=bos_id,
        eos_token_id=eos_id,
        pad_token_id=pad_id,
        use_cache=True,
        **extra,
    )
    torch.manual_seed(seed)
    model = model_cls(config)
    model.generation_config = GenerationConfig(bos_token_id=bos_id, eos_token_id=eos_id, pad_token_id=pad_id)
    return model


def _sft_examples(tokenizer: Any, dataset: TinyDataset) -> list[tuple[list[int], int]]:
    """Tokenised (ids, prompt length) pairs: original and rephrased train prompts with worked answers."""
    examples = []
    for rows in (dataset.train, dataset.train_rephrased):
        for row, problem in zip(rows, dataset.train_problems, strict=True):
            prompt = tokenizer.apply_chat_template(row["prompt"], add_generation_prompt=True, tokenize=False)
            prompt_ids = tokenizer.encode(prompt, add_special_tokens=False)
            answer_ids = tokenizer.encode(problem.solution + IM_END, add_special_tokens=False)
            examples.append((prompt_ids + answer_ids, len(prompt_ids)))
    return examples


def _run_sft(model: Any, tokenizer: Any, dataset: TinyDataset, steps: int, lr: float, seed: int) -> float:
    """Seeded supervised fine-tuning on assistant tokens only; returns the last loss."""
    examples = _sft_examples(tokenizer, dataset)
    pad_id = tokenizer.pad_token_id
    generator = torch.Generator().manual_seed(seed + 1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    batch_size = min(16, len(examples))
    model.train()
    loss_value = float("nan")
    for step in range(steps):
        picks = torch.randperm(len(examples), generator=generator)[:batch_size].tolist()
        batch = [examples[i] for i in picks]
        width = max(len(ids) for ids, _ in batch)
        input_ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
        labels = torch.full((len(batch), width), -100, dtype=torch.long)
        attention = torch.zeros((len(batch), width), dtype=torch.long)
        for row, (ids, n_prompt) in enumerate(batch):  # right padding: positions start at 0
            input_ids[row, : len(ids)] = torch.tensor(ids)
            labels[row, n_prompt : len(ids)] = torch.tensor(ids[n_prompt:])
            attention[row, : len(ids)] = 1
        loss = model(input_ids=input_ids, attention_mask=attention, labels=labels).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        loss_value = float(loss.detach())
        if step % 50 == 0 or step == steps - 1:
            logger.debug("tiny sft step %d/%d loss %.4f", step + 1, steps, loss_value)
    model.eval()
    return loss_value


def _read_marker(out_dir: Path) -> dict | None:
    try:
        return json.loads((out_dir / MARKER_NAME).read_text())
    except (OSError, ValueError):
        return None


@contextlib.contextmanager
def _build_lock(out_dir: Path) -> Iterator[None]:
    """Serialise concurrent builds of the same directory (POSIX advisory lock; no-op elsewhere)."""
    try:
        import fcntl  # fcntl: imported when used
    except ImportError:  # pragma: no cover - non-POSIX
        yield
        return
    fd = open_lock_file(out_dir.parent / f".{out_dir.name}.lock", RuntimeError)  # a planted link: refused
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def build_tiny_model(
    out_dir: Path,
    seed: int = 0,
    hidden_size: int = 64,
    num_layers: int = 2,
    num_heads: int = 4,
    vocab_size: int = 1024,
    sft_steps: int = 0,
    sft_lr: float = 3e-3,
    architecture: str = "qwen2",
    head_dim: int | None = None,
) -> Path:
    """Build (or reuse) a tiny Qwen2 model + tokenizer in ``out_dir`` and return the directory.

    A marker file records the build parameters; a directory whose marker matches is reused as is.
    The build happens in a temporary directory beside ``out_dir`` that is renamed into place when complete.
    """
    out_dir = Path(out_dir)
    params: dict[str, Any] = {
        "build_version": BUILD_VERSION,
        "seed": seed,
        "hidden_size": hidden_size,
        "num_layers": num_layers,
        "num_heads": num_heads,
        "vocab_size": vocab_size,
        "sft_steps": sft_steps,
        "sft_lr": sft_lr,
    }
    if architecture != "qwen2" or head_dim is not None:  # the default builds keep their markers (and caches)
        params.update(architecture=architecture, head_dim=head_dim)
    if _read_marker(out_dir) == params:
        return out_dir
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    with _build_lock(out_dir):
        if _read_marker(out_dir) == params:  # built by a concurrent caller meanwhile
            return out_dir
        started = time.perf_counter()
        dataset = make_tiny_dataset(seed=seed)
        tokenizer = _train_tokenizer(dataset, vocab_size)
        model = _build_model(tokenizer, seed, hidden_size, num_layers, num_heads, vocab_size, architecture, head_dim)
        if sft_steps > 0:
            final_loss = _run_sft(model, tokenizer, dataset, sft_steps, sft_lr, seed)
            logger.info("tiny model sft: %d steps, final loss %.4f", sft_steps, final_loss)
        tmp_dir = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.build-", dir=out_dir.parent))
        try:
            tmp_dir.chmod(0o755)  # mkdtemp creates 0700
            model.save_pretrained(tmp_dir)
            tokenizer.save_pretrained(tmp_dir)
            (tmp_dir / MARKER_NAME).write_text(json.dumps(params, indent=2, sort_keys=True) + "\n")
            old_dir = None
            if out_dir.exists():
                old_dir = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.old-", dir=out_dir.parent))
                os.replace(out_dir, old_dir / "stale")
            os.replace(tmp_dir, out_dir)
            if old_dir is not None:
                shutil.rmtree(old_dir, ignore_errors=True)
        except BaseException:
            shutil.rmtree(tmp_dir, ignore_errors=True)
            raise
        logger.info("built tiny model in %s (%.2f s, params %s)", out_dir, time.perf_counter() - started, params)
    return out_dir


def evaluate_tiny_model(
    model_dir: Path,
    rows: Sequence[dict],
    samples_per_prompt: int = 8,
    max_new_tokens: int = 32,
    temperature: float = 1.0,
    seed: int = 0,
) -> dict[str, float]:
    """Sample answers for ``rows``; return the ``\\boxed{}`` rate, the accuracy and the sample count."""
    from transformers import (  # transformers: imported when used
        AutoModelForCausalLM,
        AutoTokenizer,
    )

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    prompts = [tokenizer.apply_chat_template(row["prompt"], add_generation_prompt=True, tokenize=False) for row in rows]
    encoded = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    torch.manual_seed(seed)
    with torch.no_grad():
        output = model.generate(
            **encoded,
            do_sample=True,
            temperature=temperature,
            top_k=0,
            top_p=1.0,
            max_new_tokens=max_new_tokens,
            num_return_sequences=samples_per_prompt,
        )
    texts = tokenizer.batch_decode(output[:, encoded["input_ids"].shape[1] :], skip_special_tokens=True)
    boxed = correct = 0
    for i, text in enumerate(texts):
        boxed += last_boxed_only_string(text) is not None
        correct += strict_score(text, ground_truth_of(rows[i // samples_per_prompt])) > 0
    total = max(len(texts), 1)
    return {"boxed_rate": boxed / total, "accuracy": correct / total, "n": float(len(texts))}
