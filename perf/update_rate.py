"""GPU-seconds to score and train on 1024 responses, per billion parameters: a check of ``configs/cost.yaml:
update_gpu_s_per_b`` on one GPU (``docs/gpu-plan.md``, "What a cell costs").

A random-weight model of Qwen3-1.7B-Base's or Qwen3-8B-Base's shape (no download), bf16 autocast, sdpa and gradient
checkpointing, as verl's FSDP engine computes: the no-grad log-prob pass (entropy-free) at micro-batch 8 and the
training pass (forward, backward) at micro-batch 4 (half the paper's, to fit one GPU beside the log-softmax's fp32
copy), sequences of 512 + 3072 tokens, the log-probs from an fp32 log-softmax. Extrapolated to the paper's step: two
log-prob passes (old and reference) and one training pass over 1024 sequences. Not counted: FSDP's communication
across 4 GPUs, the packed-sequence mask verl's remove-padding gives sdpa, the reference's CPU offload, the rollout.
Run on a CUDA machine: ``python perf/update_rate.py [qwen3-1.7b-base|qwen3-8b-base]``.
"""

from __future__ import annotations

import json
import os
import sys
import time

import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

TOKENS = 512 + 3072
RESPONSES = 1024


def timed(fn, repeats: int) -> float:  # type: ignore[no-untyped-def]
    fn()  # warm-up
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / repeats


SHAPES = {  # the published config.json of each (configs/base_model/*.yaml: shape)
    "qwen3-1.7b-base": {"hidden_size": 2048, "intermediate_size": 6144, "num_hidden_layers": 28,
                        "num_attention_heads": 16, "num_key_value_heads": 8, "tie_word_embeddings": True},
    "qwen3-8b-base": {"hidden_size": 4096, "intermediate_size": 12288, "num_hidden_layers": 36,
                      "num_attention_heads": 32, "num_key_value_heads": 8, "tie_word_embeddings": False},
}  # fmt: skip


def main(shape: str) -> dict[str, float | str]:
    config = Qwen3Config(vocab_size=151936, head_dim=128, max_position_embeddings=40960, **SHAPES[shape])
    config._attn_implementation = "sdpa"
    torch.manual_seed(0)
    # 1.7B: fp32 master weights and AdamW, as verl keeps them. 8B: its fp32 weights and AdamW states (131 GB) do not
    # fit one GPU beside the activations, so bf16 weights and no optimizer step: the same matrix products.
    small = shape == "qwen3-1.7b-base"
    model = Qwen3ForCausalLM(config).to("cuda", torch.float32 if small else torch.bfloat16)
    model.gradient_checkpointing_enable()
    params_b = sum(p.numel() for p in model.parameters()) / 1e9
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6, fused=True) if small else None

    def logprobs(batch: torch.Tensor) -> torch.Tensor:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(input_ids=batch).logits
        return torch.gather(logits.float().log_softmax(-1), -1, batch.unsqueeze(-1)).squeeze(-1)

    score_batch = torch.randint(0, config.vocab_size, (8, TOKENS), device="cuda")
    train_batch = torch.randint(0, config.vocab_size, (4, TOKENS), device="cuda")

    def score() -> None:
        model.eval()
        with torch.no_grad():
            logprobs(score_batch)

    def train() -> None:
        model.train()
        loss = -logprobs(train_batch).mean()
        loss.backward()
        if optimizer is not None:
            optimizer.step()
        model.zero_grad(set_to_none=True)

    score_s = timed(score, 3) / len(score_batch)  # per sequence
    train_s = timed(train, 3) / len(train_batch)
    step_gpu_s = RESPONSES * (2 * score_s + train_s)
    return {
        "shape": shape,
        "optimizer": "fp32 master + AdamW" if small else "bf16 weights, no optimizer step",
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "params_b": round(params_b, 3),
        "score_s_per_sequence": round(score_s, 4),
        "train_s_per_sequence": round(train_s, 4),
        "step_gpu_s": round(step_gpu_s, 1),
        "update_gpu_s_per_b": round(step_gpu_s / params_b, 1),
        "peak_gb": round(torch.cuda.max_memory_allocated() / 2**30, 1),
    }


if __name__ == "__main__":
    name = sys.argv[1] if len(sys.argv) > 1 else "qwen3-1.7b-base"
    result = main(name)
    print(json.dumps(result))
    out = os.environ.get("OUT")
    if out:
        with open(os.path.join(out, f"update_rate_{name}.json"), "w") as f:
            json.dump(result, f)
