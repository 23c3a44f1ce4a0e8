"""A bf16 teacher under FSDP1 (two gloo ranks on CPU, FULL_SHARD, a root unit holding the embedding and the head)
follows the EMA in every unit: FSDP1 keeps the root unit's gathered weights after a forward and would reuse them in
the next forward unless the EMA frees them (``free_gathered_fsdp1``)."""

from __future__ import annotations

from tests.support.ranks import run_ranks

RANK_SCRIPT = r"""
import json, os, sys
import torch, torch.distributed as dist
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, ShardingStrategy
from corewarding.training.verl.teacher import ema_update_shards

RATE, DEVICE = float(sys.argv[1]), sys.argv[2]
if DEVICE == "cuda":
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
else:
    device = torch.device("cpu")
dist.init_process_group("nccl" if DEVICE == "cuda" else "gloo")

def model(seed):
    torch.manual_seed(seed)
    blocks = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh())
    return torch.nn.Sequential(torch.nn.Embedding(16, 8), blocks, torch.nn.Linear(8, 16)).to(device, torch.bfloat16)

def wrap(m):  # as verl wraps a decoder: the layers are units, embeddings and lm_head stay in the root unit
    m[1] = FSDP(m[1], device_id=device, sharding_strategy=ShardingStrategy.FULL_SHARD)
    return FSDP(m, device_id=device, sharding_strategy=ShardingStrategy.FULL_SHARD)

teacher_ref, policy_ref = model(0), model(1)  # unwrapped copies: the EMA applied to whole parameters
teacher, policy = wrap(model(0)), wrap(model(1))
ids = torch.tensor([[1, 5, 9, 14]], device=device)
with torch.no_grad():
    teacher(ids)  # the reference log-prob pass: FSDP1 keeps the root unit gathered
    root_kept = not teacher._handle.needs_unshard()
    for step in range(2):
        ema_update_shards(teacher, policy, RATE)
        for t, p in zip(teacher_ref.parameters(), policy_ref.parameters()):
            t.mul_(1 - RATE).add_(p, alpha=RATE)
        got, want = teacher(ids).float(), teacher_ref(ids).float()
print(json.dumps({"root_kept": root_kept, "max_diff": (got - want).abs().max().item(),
                  "moved": (want - model(0)(ids).float()).abs().max().item()}), flush=True)
dist.barrier()  # both ranks done, then leave without gloo's teardown (it aborts now and then: "terminate called")
os._exit(0)
"""


def run_fsdp_ranks(device: str) -> list[dict[str, float]]:
    """The script on two ranks (FSDP1 turns FULL_SHARD into NO_SHARD on one rank, which hides the bug)."""
    return run_ranks(RANK_SCRIPT, "0.5", device, timeout=120)


def check(results: list[dict[str, float]]) -> None:
    for result in results:
        assert result["root_kept"], "FSDP1 no longer keeps the root unit gathered: this test lost its subject"
        assert result["moved"] > 0.05  # the EMA changes the output visibly
        assert result["max_diff"] == 0.0, result  # the sharded teacher's forward is exactly the EMA'd model's


def test_bf16_fsdp1_teacher_follows_the_ema_in_its_root_unit() -> None:
    check(run_fsdp_ranks("cpu"))
