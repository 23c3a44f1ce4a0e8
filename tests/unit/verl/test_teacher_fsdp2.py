"""The teacher EMA on FSDP2 shards (two gloo ranks on CPU), wrapped as verl 0.9.1 wraps the engines
(``verl/utils/fsdp_utils.py`` ``apply_fsdp2``: each block, then the root, with ``reshard_after_forward`` from the engine
config, true by default; ``transformer_impl.py`` ~459-470: a bf16 ``MixedPrecisionPolicy`` and, for the forward-only
reference that holds the teacher, ``CPUOffloadPolicy``).

FSDP1 kept its root unit gathered after a forward, so an EMA written to the local shards never reached the embedding
and head of the next forward. FSDP2 with an explicit ``reshard_after_forward=True`` reshards the root too: after a
no-grad forward, an EMA on the local shards and another forward, the teacher must give exactly what the unwrapped
model gives after the same EMA. With ``reshard_after_forward=False`` the root keeps its gathered parameters registered;
the EMA then must refuse (a shard shape mismatch), never update a copy that the next reshard throws away."""

from __future__ import annotations

from tests.support.ranks import run_ranks

RANK_SCRIPT = r"""
import copy, json, os, sys
import torch, torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import DTensor
from corewarding.training.verl.teacher import ema_update_shards

RATE = float(sys.argv[1])
dist.init_process_group("gloo")
mesh = init_device_mesh("cpu", (2,), mesh_dim_names=("fsdp",))
mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32, cast_forward_inputs=True)

def model(seed):  # fp32 master weights, as the teacher must be
    torch.manual_seed(seed)
    blocks = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh())
    return torch.nn.Sequential(torch.nn.Embedding(16, 8), blocks, torch.nn.Linear(8, 16))

def wrap(m, reshard_after_forward, offload):  # as apply_fsdp2: the block, then the root (embedding and head)
    kwargs = {"mesh": mesh, "mp_policy": mp, "reshard_after_forward": reshard_after_forward,
              "offload_policy": CPUOffloadPolicy(pin_memory=False) if offload else None}
    fully_shard(m[1], **kwargs)
    fully_shard(m, **kwargs)
    return m

def bf16_forward(m, ids):  # what FSDP2's bf16 all-gather computes: the fp32 weights rounded to bf16
    return copy.deepcopy(m).to(torch.bfloat16)(ids).float()

def one_step(policy, ids):  # the actor's step before the EMA: the old-log-prob pass, then the update's forward/backward
    with torch.no_grad():
        policy(ids)
    policy(ids).float().sum().backward()

ids = torch.tensor([[1, 5, 9, 14]])
out = {}

# verl's settings: the teacher is the forward-only reference (CPU offload), the policy the actor
teacher_ref, policy_ref = model(0), model(1)
teacher, policy = wrap(model(0), True, True), wrap(model(1), True, False)
with torch.no_grad():
    teacher(ids)  # the reference log-prob pass
out["root_sharded"] = all(isinstance(p, DTensor) for p in teacher.parameters())
one_step(policy, ids)
diffs = []
with torch.no_grad():
    for step in range(2):
        ema_update_shards(teacher, policy, RATE)
        for t, p in zip(teacher_ref.parameters(), policy_ref.parameters()):
            t.mul_(1 - RATE).add_(p, alpha=RATE)
        diffs.append((teacher(ids).float() - bf16_forward(teacher_ref, ids)).abs().max().item())
    out["max_diff"] = max(diffs)
    out["moved"] = (bf16_forward(teacher_ref, ids) - bf16_forward(model(0), ids)).abs().max().item()

# reshard_after_forward=False: the gathered parameters stay registered after the forward
teacher, policy = wrap(model(0), False, True), wrap(model(1), False, False)
with torch.no_grad():
    teacher(ids)
one_step(policy, ids)
try:
    with torch.no_grad():
        ema_update_shards(teacher, policy, RATE)
    out["unsharded_error"] = ""
except ValueError as error:
    out["unsharded_error"] = str(error)
print(json.dumps(out), flush=True)
dist.barrier()  # both ranks done, then leave without gloo's teardown (it aborts now and then: "terminate called")
os._exit(0)
"""


def test_fsdp2_teacher_follows_the_ema_and_refuses_gathered_parameters() -> None:
    for result in run_ranks(RANK_SCRIPT, "0.5", timeout=180):
        assert result["root_sharded"], result  # with reshard_after_forward=True even the root reshards
        assert result["moved"] > 0.05, result  # the EMA changes the output visibly
        assert result["max_diff"] == 0.0, result  # the sharded teacher's forward is exactly the EMA'd model's
        assert "teacher shard (16, 8) vs policy shard (8, 8)" in result["unsharded_error"], result
