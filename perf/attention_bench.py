"""Attention implementations for verl's remove-padding micro-batches, timed and checked against each other (issue 44).

verl's ``use_remove_padding`` hands the model ONE packed row per micro-batch: the sequences concatenated, their
``position_ids`` restarting at 0 for each, ``attention_mask=None``. transformers detects the packing from the position
ids (``masking_utils.find_packed_sequence_indices``) and then builds, per ``attn_implementation``: a dense block-causal
mask over the whole row for "sdpa" (work and memory grow with the square of the row), a BlockMask for
"flex_attention", varlen kernels for "flash_attention_2" (the flash-attn package, CUDA only). This script times one
micro-batch of each of verl's two passes under each variant:

- packed sdpa, packed flex_attention, packed flash_attention_2 (where ``import flash_attn`` succeeds): the packed row;
- padded sdpa: a [batch, longest] right-padded batch with its attention mask (what verl does without remove-padding);
- one sequence at a time: a loop over the sequences, no mask at all, the reference for the log-probs.

A random-weight model of Qwen3-1.7B-Base's or Qwen3-8B-Base's shape (``SHAPES`` of ``perf/update_rate.py``, no
download) in bf16 weights under bf16 autocast, gradient checkpointing on: the log-prob pass (no grad) over 16 sequences,
the training pass (forward, backward of the mean token log-prob) over 8, lengths drawn by a seeded RNG uniformly from
600 to 3,584 tokens; each log-prob comes from an fp32 log-softmax of a sequence's logits gathered at its next tokens
(the same per-sequence code for every variant, so only the attention differs). Each figure is the median of 2 runs
after a warm-up; each variant's column also carries the largest absolute log-prob difference from one-at-a-time.

The recompile check (the issue's "compile counts and time over >= 20 micro-batches of varying length"): after a
``torch._dynamo.reset()``, 20 training micro-batches through packed flex_attention whose packed length changes every
time, each timed and its new dynamo graphs counted; it passes when no graph is compiled after the third micro-batch.
On CPU FlexAttention has no backward, so there the training rows are skipped and the check runs the log-prob pass.

A wall-clock guard stops adding work past ``--budget`` seconds (default 270) and names the rows it skipped.
Run on one GPU: ``python perf/attention_bench.py [--shapes qwen3-1.7b-base,qwen3-8b-base] [--out FILE.json]``;
``--tiny --device cpu`` runs a tiny Qwen3 in fp32 on CPU in seconds (``tests/unit/test_attention_bench.py``).
"""

from __future__ import annotations

import argparse
import importlib
import json
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch._dynamo
import transformers
from torch._dynamo.utils import counters
from transformers import AutoModelForCausalLM, PreTrainedModel, Qwen3Config

sys.path.insert(0, str(Path(__file__).resolve().parent))

from update_rate import SHAPES

TINY = "tiny"
TINY_SHAPE = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
              "num_key_value_heads": 2, "tie_word_embeddings": False}  # fmt: skip
VARIANTS = ("packed sdpa", "packed flex_attention", "padded sdpa", "one at a time", "packed flash_attention_2")
HEADERS = {"padded sdpa": "padded sdpa (no remove-padding)", "one at a time": "one sequence at a time"}
IMPLEMENTATION = {"packed sdpa": "sdpa", "packed flex_attention": "flex_attention", "padded sdpa": "sdpa",
                  "one at a time": "sdpa", "packed flash_attention_2": "flash_attention_2"}  # fmt: skip
PASSES = ("log-prob", "training")
CHECK_MICRO_BATCHES = 20
CHECK_SETTLED_AFTER = 3  # no compile after the first 3 micro-batches of the recompile check


@dataclass(frozen=True)
class Sizes:
    """Micro-batch sizes and the range the lengths are drawn from."""

    log_prob_batch: int
    train_batch: int
    min_len: int
    max_len: int
    vocab: int

    def batch(self, pass_name: str) -> int:
        return self.log_prob_batch if pass_name == "log-prob" else self.train_batch


FULL = Sizes(log_prob_batch=16, train_batch=8, min_len=600, max_len=3584, vocab=151936)
# Tiny rows stay above 128 tokens: a packed row whose BlockMask grows from 1 block of 128 to 2 recompiles flex_attention
# once more (dynamo specializes sizes of 1), which real rows of thousands of tokens never meet.
SMALL = Sizes(log_prob_batch=4, train_batch=2, min_len=65, max_len=128, vocab=512)


@dataclass
class Row:
    """One variant on one shape and pass: its seconds per micro-batch, or why it did not run."""

    variant: str
    shape: str
    pass_name: str
    sequences: int
    tokens: int
    seconds: float | None = None
    runs_s: list[float] = field(default_factory=list)
    max_abs_logprob_diff: float | None = None
    peak_gib: float | None = None  # CUDA: the most memory allocated during the row
    skipped: str | None = None


@dataclass
class MicroBatch:
    """Token ids of a micro-batch's sequences, on the device."""

    sequences: list[torch.Tensor]

    @property
    def lengths(self) -> list[int]:
        return [len(s) for s in self.sequences]

    def packed(self) -> tuple[torch.Tensor, torch.Tensor]:
        """One row: the sequences concatenated, position ids restarting at 0 for each (verl's remove-padding)."""
        ids = torch.cat(self.sequences).unsqueeze(0)
        positions = torch.cat([torch.arange(n, device=ids.device) for n in self.lengths]).unsqueeze(0)
        return ids, positions

    def padded(self) -> tuple[torch.Tensor, torch.Tensor]:
        """[batch, longest] right-padded ids and their attention mask."""
        longest = max(self.lengths)
        ids = torch.zeros(len(self.sequences), longest, dtype=torch.long, device=self.sequences[0].device)
        mask = torch.zeros_like(ids)
        for i, s in enumerate(self.sequences):
            ids[i, : len(s)] = s
            mask[i, : len(s)] = 1
        return ids, mask


def draw(sizes: Sizes, count: int, generator: torch.Generator, device: str) -> MicroBatch:
    lengths = torch.randint(sizes.min_len, sizes.max_len + 1, (count,), generator=generator).tolist()
    return MicroBatch([torch.randint(0, sizes.vocab, (n,), generator=generator).to(device) for n in lengths])


def sequence_logprobs(logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """log p(token t+1 | ..t) of one sequence: fp32 log-softmax of its logits [n, vocab] at the next tokens [n]."""
    return logits[:-1].float().log_softmax(-1).gather(-1, ids[1:].unsqueeze(-1)).squeeze(-1)


def forward_logprobs(model: PreTrainedModel, variant: str, batch: MicroBatch) -> list[torch.Tensor]:
    """Each sequence's log-probs under one variant's way of feeding the micro-batch."""
    if variant == "one at a time":
        return [sequence_logprobs(model(input_ids=s[None], use_cache=False).logits[0], s) for s in batch.sequences]
    if variant == "padded sdpa":
        ids, mask = batch.padded()
        logits = model(input_ids=ids, attention_mask=mask, use_cache=False).logits
        return [sequence_logprobs(logits[i, : len(s)], s) for i, s in enumerate(batch.sequences)]
    ids, positions = batch.packed()  # use_cache=False: with a cache transformers does not look for packing
    logits = model(input_ids=ids, position_ids=positions, use_cache=False).logits[0]
    out, start = [], 0
    for s in batch.sequences:
        out.append(sequence_logprobs(logits[start : start + len(s)], s))
        start += len(s)
    return out


class Bench:
    """One shape's model, switched between attention implementations, and the passes it runs."""

    def __init__(self, shape: str, device: str, tiny: bool) -> None:
        self.shape, self.device = shape, device
        self.sizes = SMALL if tiny else FULL
        dims: dict[str, Any] = TINY_SHAPE if tiny else SHAPES[shape]
        head_dim = 16 if tiny else 128
        config = Qwen3Config(vocab_size=self.sizes.vocab, head_dim=head_dim, max_position_embeddings=40960, **dims)
        self.autocast = device == "cuda"  # bf16 weights and autocast on CUDA; fp32 on CPU, for the exact comparison
        torch.manual_seed(0)
        with torch.device(device):
            self.model = AutoModelForCausalLM.from_config(
                config, dtype=torch.bfloat16 if self.autocast else torch.float32, attn_implementation="sdpa"
            )
        self.model.gradient_checkpointing_enable()
        generator = torch.Generator().manual_seed(1234)
        self.batches = {p: draw(self.sizes, self.sizes.batch(p), generator, device) for p in PASSES}
        self.reference: dict[str, list[torch.Tensor]] = {}

    def switch(self, variant: str) -> None:
        self.model.set_attn_implementation(IMPLEMENTATION[variant])

    def run(self, variant: str, pass_name: str, batch: MicroBatch) -> list[torch.Tensor]:
        """One micro-batch of a pass; the log-probs, detached."""
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=self.autocast):
            if pass_name == "log-prob":
                self.model.eval()
                with torch.no_grad():
                    return forward_logprobs(self.model, variant, batch)
            self.model.train()
            logprobs = forward_logprobs(self.model, variant, batch)
            loss = -torch.cat(logprobs).mean()
        loss.backward()
        self.model.zero_grad(set_to_none=True)
        return [lp.detach() for lp in logprobs]

    def sync(self) -> None:
        if self.device == "cuda":
            torch.cuda.synchronize()

    def timed(self, variant: str, pass_name: str, repeats: int) -> Row:
        """Warm-up, then the median of ``repeats`` runs; a variant that fails (out of memory, say) is a skipped row."""
        batch = self.batches[pass_name]
        row = Row(variant, self.shape, pass_name, len(batch.sequences), sum(batch.lengths))
        if self.device == "cuda":
            torch.cuda.reset_peak_memory_stats()
        try:
            self.switch(variant)
            logprobs = self.run(variant, pass_name, batch)  # warm-up (and flex_attention's compile)
            for _ in range(repeats):
                self.sync()
                start = time.perf_counter()
                logprobs = self.run(variant, pass_name, batch)
                self.sync()
                row.runs_s.append(time.perf_counter() - start)
        except Exception as error:  # reported in the row, and the benchmark goes on with the next one
            row.skipped = failure(error)
            return row
        finally:
            self.model.zero_grad(set_to_none=True)
            if self.device == "cuda":
                row.peak_gib = round(torch.cuda.max_memory_allocated() / 2**30, 1)
                torch.cuda.empty_cache()
        row.seconds = statistics.median(row.runs_s)
        if variant == "one at a time":
            self.reference[pass_name] = logprobs
        if pass_name in self.reference:
            row.max_abs_logprob_diff = max(
                (a.float() - b.float()).abs().max().item()
                for a, b in zip(logprobs, self.reference[pass_name], strict=True)
            )
        return row

    def recompile_check(self, pass_name: str, note: str) -> dict[str, Any]:
        """Packed flex_attention over micro-batches whose packed length changes every time: compiles and seconds."""
        self.switch("packed flex_attention")
        torch._dynamo.reset()
        counters.clear()
        generator = torch.Generator().manual_seed(99)
        graphs: list[int] = []
        seconds: list[float] = []
        lengths: list[int] = []
        for _ in range(CHECK_MICRO_BATCHES):
            batch = draw(self.sizes, self.sizes.batch(pass_name), generator, self.device)
            while lengths and sum(batch.lengths) == lengths[-1]:
                batch = draw(self.sizes, self.sizes.batch(pass_name), generator, self.device)
            before = counters["stats"]["unique_graphs"]
            self.sync()
            start = time.perf_counter()
            self.run("packed flex_attention", pass_name, batch)
            self.sync()
            seconds.append(time.perf_counter() - start)
            graphs.append(counters["stats"]["unique_graphs"] - before)
            lengths.append(sum(batch.lengths))
        compiled_at = [i for i, g in enumerate(graphs) if g]
        steady = seconds[CHECK_SETTLED_AFTER:]
        return {
            "shape": self.shape,
            "pass": pass_name,
            "note": note,
            "micro_batches": CHECK_MICRO_BATCHES,
            "packed_lengths": lengths,
            "graphs_per_micro_batch": graphs,
            "graphs_compiled": sum(graphs),
            "micro_batches_that_compiled": compiled_at,
            "first_micro_batch_s": round(seconds[0], 3),
            "steady_median_s": round(statistics.median(steady), 4),
            "seconds": [round(s, 4) for s in seconds],
            "passed": all(i < CHECK_SETTLED_AFTER for i in compiled_at),
        }


def failure(error: Exception) -> str:
    traceback.print_exception(error, file=sys.stderr)
    first = str(error).strip().splitlines()[0][:200] if str(error).strip() else ""
    return f"failed: {type(error).__name__}: {first}"


def flash_attn_missing() -> str | None:
    try:
        importlib.import_module("flash_attn")
    except Exception as error:  # ImportError, or a broken build's own error
        return f"not installed ({type(error).__name__})"
    return None


def skip_reason(variant: str, pass_name: str, device: str) -> str | None:
    if variant == "packed flash_attention_2":
        missing = flash_attn_missing()
        if missing:
            return missing
        if device != "cuda":
            return "CUDA only"
    if variant == "packed flex_attention" and pass_name == "training" and device != "cuda":
        return "no backward on CPU (FlexAttention)"
    return None


def table(rows: list[Row], value: Callable[[Row], str]) -> str:
    lines = [
        "| shape, pass | " + " | ".join(HEADERS.get(v, v) for v in VARIANTS) + " |",
        "|---|" + "---|" * len(VARIANTS),
    ]
    cells = {(r.shape, r.pass_name, r.variant): r for r in rows}
    for shape, pass_name in dict.fromkeys((r.shape, r.pass_name) for r in rows):
        line = [f"{shape} {pass_name}"]
        for variant in VARIANTS:
            row = cells.get((shape, pass_name, variant))
            line.append("" if row is None else f"skipped: {row.skipped}" if row.skipped else value(row))
        lines.append("| " + " | ".join(line) + " |")
    return "\n".join(lines)


def main(shapes: list[str], device: str, tiny: bool, budget_s: float, repeats: int) -> dict[str, Any]:
    started = time.perf_counter()
    rows: list[Row] = []
    checks: list[dict[str, Any]] = []
    card = torch.cuda.get_device_name() if device == "cuda" else "cpu"
    for shape in shapes:
        if time.perf_counter() - started > budget_s:
            rows += [
                Row(v, shape, p, 0, 0, skipped=f"wall-clock budget {budget_s:g} s spent")
                for p in PASSES
                for v in VARIANTS
            ]
            continue
        bench = Bench(shape, device, tiny)
        for pass_name in PASSES:
            for variant in ("one at a time", *(v for v in VARIANTS if v != "one at a time")):
                batch = bench.batches[pass_name]
                reason = skip_reason(variant, pass_name, device)
                if reason is None and time.perf_counter() - started > budget_s:
                    reason = f"wall-clock budget {budget_s:g} s spent"
                if reason is not None:
                    rows.append(
                        Row(variant, shape, pass_name, len(batch.sequences), sum(batch.lengths), skipped=reason)
                    )
                    continue
                # The recompile check once, on the first shape, right before the flex row it warms up: the pass with a
                # backward where flex_attention has one (CUDA), else the log-prob pass.
                check_pass = "training" if device == "cuda" else "log-prob"
                if variant == "packed flex_attention" and pass_name == check_pass and not checks:
                    note = "training: forward + backward" if device == "cuda" else "log-prob only: no backward on CPU"
                    try:
                        checks.append(bench.recompile_check(pass_name, note))
                    except Exception as error:
                        checks.append({"shape": shape, "pass": pass_name, "note": note, "error": failure(error)})
                rows.append(bench.timed(variant, pass_name, repeats))
                done = rows[-1]
                print(f"{shape} {pass_name} {variant}: {done.skipped or f'{done.seconds:.3f} s'}", file=sys.stderr)
        del bench
        if device == "cuda":
            torch.cuda.empty_cache()
    return {
        "card": card,
        "device": device,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "dtype": "bf16 weights, bf16 autocast" if device == "cuda" else "fp32",
        "repeats": repeats,
        "budget_s": budget_s,
        "elapsed_s": round(time.perf_counter() - started, 1),
        "rows": [asdict(r) for r in rows],
        "recompile_check": checks,
        "skipped": [f"{r.shape} {r.pass_name} {r.variant}: {r.skipped}" for r in rows if r.skipped],
    }


def report(result: dict[str, Any]) -> str:
    rows = [Row(**r) for r in result["rows"]]
    lines = [
        f"card: {result['card']}, torch {result['torch']}, transformers {result['transformers']}, {result['dtype']}",
        f"seconds per micro-batch (median of {result['repeats']} after a warm-up):",
        table(rows, lambda r: f"{r.seconds:.3f}"),
        "",
        "max |log-prob difference| against one sequence at a time:",
        table(rows, lambda r: "" if r.max_abs_logprob_diff is None else f"{r.max_abs_logprob_diff:.2e}"),
    ]
    for check in result["recompile_check"]:
        if "error" in check:
            lines += ["", f"recompile check, packed flex_attention, {check['shape']} {check['note']}: {check['error']}"]
            continue
        lines += [
            "",
            f"recompile check, packed flex_attention, {check['shape']} {check['note']}: {check['micro_batches']} "
            f"micro-batches, {check['graphs_compiled']} graphs compiled at micro-batches "
            f"{check['micro_batches_that_compiled']}, first {check['first_micro_batch_s']} s, steady "
            f"{check['steady_median_s']} s: {'PASS' if check['passed'] else 'FAIL'}",
        ]
    lines += ["", f"elapsed {result['elapsed_s']} s (budget {result['budget_s']} s)"]
    lines += [f"skipped: {s}" for s in result["skipped"]]
    return "\n".join(lines)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--shapes", default=",".join(SHAPES), help="comma-separated: " + ", ".join(SHAPES))
    parser.add_argument("--out", type=Path, help="write all figures to this JSON file")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--tiny", action="store_true", help="a tiny Qwen3 and 65-128 token sequences (CPU test)")
    parser.add_argument("--budget", type=float, default=270.0, help="stop adding work after this many seconds")
    parser.add_argument("--repeats", type=int, default=2, help="timed runs after the warm-up (the median is kept)")
    args = parser.parse_args(argv)
    unknown = [s for s in args.shapes.split(",") if s not in SHAPES]
    if unknown and not args.tiny:
        parser.error(f"unknown shapes {unknown}: choose from {list(SHAPES)}")
    return args


if __name__ == "__main__":
    args = parse()
    result = main([TINY] if args.tiny else args.shapes.split(","), args.device, args.tiny, args.budget, args.repeats)
    print(report(result))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
