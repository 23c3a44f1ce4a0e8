"""The FSDP1 bf16 teacher EMA on CUDA with NCCL (two GPUs: on one, FSDP1 does not shard and the bug cannot show)."""

from __future__ import annotations

import pytest
import torch

from tests.unit.verl.test_teacher_fsdp1 import check, run_fsdp_ranks


@pytest.mark.requires_gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices (FSDP1 shards only with 2 ranks)")
def test_bf16_fsdp1_teacher_follows_the_ema_on_cuda() -> None:
    check(run_fsdp_ranks("cuda"))
