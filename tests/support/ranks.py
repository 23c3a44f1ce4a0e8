"""Run a script as the ranks of a torch.distributed job on this machine (gloo on CPU, or NCCL where asked)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from tests.support.net import free_port


def run_ranks(script: str, *args: str, world_size: int = 2, timeout: float = 180) -> list[dict[str, Any]]:
    """Start ``script`` (``python -c``) once per rank with the torchrun-style environment; each rank's last stdout
    line, parsed as JSON, in rank order. A rank that fails fails the test with its stderr."""
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "WORLD_SIZE": str(world_size)}
    env["OMP_NUM_THREADS"] = "1"
    procs = [
        subprocess.Popen(
            [sys.executable, "-W", "ignore", "-c", script, *args],
            env={**env, "RANK": str(rank), "LOCAL_RANK": str(rank)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in range(world_size)
    ]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=timeout)
        assert proc.returncode == 0, err[-3000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    return results


# The start of a rank script: a tiny Llama under FSDP2 (DTensor shards, wrapped as verl's apply_fsdp2 wraps the cells:
# each decoder layer, then the root) after one AdamW step, and verl's real FSDPCheckpointManager over it (`manager`);
# `wrap` wraps another module the same way.
VERL_FSDP_CHECKPOINT_SETUP = r"""
import json, os, sys
from pathlib import Path
import torch, torch.distributed as dist
from omegaconf import OmegaConf
from tokenizers import Tokenizer, models
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast
from verl.utils.checkpoint.fsdp_checkpoint_manager import FSDPCheckpointManager

dist.init_process_group("gloo")
torch.manual_seed(0)
config = LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                     num_key_value_heads=2)
mesh = init_device_mesh("cpu", (2,), mesh_dim_names=("fsdp",))
def wrap(m):
    for layer in m.model.layers:
        fully_shard(layer, mesh=mesh, reshard_after_forward=True)
    fully_shard(m, mesh=mesh, reshard_after_forward=True)
    return m
model = wrap(LlamaForCausalLM(config))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
model(torch.tensor([[1, 2, 3]])).logits.sum().backward()
optimizer.step()
vocab = models.WordLevel({"a": 0, "<unk>": 1}, unk_token="<unk>")
tokenizer = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(vocab))
contents = {"save_contents": ["model", "optimizer", "extra"], "load_contents": ["model", "optimizer", "extra"]}
manager = FSDPCheckpointManager(model, optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0),
                                processing_class=tokenizer, checkpoint_config=OmegaConf.create(contents))
"""
