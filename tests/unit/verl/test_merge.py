"""`corewarding checkpoint merge`: a checkpoint written by verl's own FSDP checkpoint manager (2 ranks, FSDP2 on
CPU) becomes a Hugging Face folder through verl's own model merger, with the trained weights."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from corewarding.cli import main

SHIFT = 0.25  # "training": every weight moves by this much
WRITER = """
import sys
import torch, torch.distributed as dist, torch.multiprocessing as mp
from omegaconf import OmegaConf
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from transformers import AutoModelForCausalLM, AutoTokenizer
from verl.utils.checkpoint.fsdp_checkpoint_manager import FSDPCheckpointManager

def write_rank(rank, model_dir, actor_dir, store, shift):
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(shift)
    mesh = init_device_mesh("cpu", (2,), mesh_dim_names=("fsdp",))
    for layer in model.model.layers:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    config = OmegaConf.create({"save_contents": ["model"], "load_contents": ["model"]})
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    manager = FSDPCheckpointManager(model, processing_class=tokenizer, checkpoint_config=config)
    manager.save_checkpoint(actor_dir, global_step=3)
    dist.destroy_process_group()

if __name__ == "__main__":
    model_dir, actor_dir, store, shift = sys.argv[1:5]
    mp.start_processes(write_rank, args=(model_dir, actor_dir, store, float(shift)), nprocs=2, start_method="fork")
"""


@pytest.fixture(scope="module")
def run_dir(tiny_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A checkpoint as a 2-GPU verl run leaves it: 2 FSDP2 ranks (gloo on CPU), verl's FSDPCheckpointManager.

    A fresh interpreter forks the two ranks (forking the test process itself, with its threads, can deadlock).
    """
    run = tmp_path_factory.mktemp("run")
    actor = run / "checkpoints" / "global_step_3" / "actor"
    args = [str(tiny_dir), str(actor), str(run / "store"), str(SHIFT)]
    subprocess.run([sys.executable, "-W", "ignore", "-c", WRITER, *args], check=True, capture_output=True, timeout=300)
    return run


def test_merge_writes_the_trained_weights_as_a_hugging_face_model(
    run_dir: Path, tiny_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shards = sorted(p.name for p in (run_dir / "checkpoints/global_step_3/actor").glob("model_world_size_*"))
    assert shards == ["model_world_size_2_rank_0.pt", "model_world_size_2_rank_1.pt"]
    assert main(["checkpoint", "merge", str(run_dir)]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    hf = Path(out["hf_dir"])
    assert hf == run_dir / "hf" / "global_step_3" and (hf / "model.safetensors").is_file()
    assert not list((run_dir / "hf").glob(".*tmp*"))
    base = AutoModelForCausalLM.from_pretrained(tiny_dir, dtype=torch.float32).state_dict()
    merged = AutoModelForCausalLM.from_pretrained(hf, dtype=torch.float32).state_dict()
    assert merged.keys() == base.keys()
    for name, weight in base.items():  # verl's merger saves bf16
        torch.testing.assert_close(merged[name], (weight + SHIFT).bfloat16().float(), rtol=0, atol=0)
    assert AutoTokenizer.from_pretrained(hf).eos_token == AutoTokenizer.from_pretrained(tiny_dir).eos_token


def test_merge_refuses_to_overwrite_and_names_missing_steps(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if not (run_dir / "hf" / "global_step_3").exists():
        assert main(["checkpoint", "merge", str(run_dir)]) == 0
    capsys.readouterr()
    assert main(["checkpoint", "merge", str(run_dir)]) == 2
    assert "exists" in capsys.readouterr().err
    assert main(["checkpoint", "merge", str(run_dir), "--step", "7"]) == 2
    assert "no checkpoint for step 7; saved steps: [3]" in capsys.readouterr().err
    assert main(["checkpoint", "merge", str(run_dir / "nowhere")]) == 2
    assert "no verl actor checkpoint" in capsys.readouterr().err


def test_merge_refuses_a_shard_that_would_run_code(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    crafted = tmp_path / "run"
    shutil.copytree(run_dir / "checkpoints", crafted / "checkpoints")
    shard = crafted / "checkpoints/global_step_3/actor/model_world_size_2_rank_1.pt"
    marker = tmp_path / "code-ran"
    torch.save({"model.embed_tokens.weight": torch.zeros(2), "x": _Crafted(marker)}, shard)
    assert main(["checkpoint", "merge", str(crafted)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"error: {shard}: refused: loading it needs posix.system"), err[-3:]
    assert not marker.exists() and not (crafted / "hf").exists()


class _Crafted:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple:
        return (os.system, (f"touch {self.marker}",))
