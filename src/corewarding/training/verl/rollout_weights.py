"""The teacher's weights into vLLM in the rollout's dtype.

verl 0.9.1 pushes weights to vLLM as its FSDP engine yields them (``FSDPEngine.get_per_tensor_param``: each
parameter gathered with ``full_tensor()``, in the module's dtype), and its bucket sender deliberately does not cast
(``workers/rollout/vllm_rollout/bucketed_weight_transfer.py`` ~118-125: some models keep fp32 parameters in vLLM).
vLLM then copies each tensor into its own parameter, casting there. The teacher is fp32 (``method.teacher.dtype``),
so pushed as is it moves 4 bytes per parameter every step (~33 GB at 8B) for weights vLLM stores in bf16.

``CastWeights`` wraps the teacher's engine so that what reaches vLLM is already in the rollout dtype: for a dense
model, whose vLLM parameters are all in that dtype, the weights vLLM ends up with are the same (both casts round to
nearest even), and half the bytes cross.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import torch


def cast_floating(named: Iterable[tuple[str, torch.Tensor]], dtype: torch.dtype) -> Iterator[tuple[str, torch.Tensor]]:
    """Each ``(name, tensor)`` with floating tensors cast to ``dtype`` (others as they are), one at a time."""
    for name, tensor in named:
        yield name, tensor.to(dtype) if tensor.is_floating_point() and tensor.dtype != dtype else tensor


class CastWeights:
    """A verl training engine whose ``get_per_tensor_param`` yields floating weights in ``dtype``; every other
    attribute is the engine's own."""

    def __init__(self, engine: Any, dtype: torch.dtype) -> None:
        self._engine = engine
        self._dtype = dtype

    def get_per_tensor_param(self, *args: Any, **kwargs: Any) -> tuple[Iterator[tuple[str, torch.Tensor]], Any]:
        params, peft_config = self._engine.get_per_tensor_param(*args, **kwargs)
        return cast_floating(params, self._dtype), peft_config

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)


class EngineHolder:
    """Stands in for ``ActorRolloutRefWorker.actor`` during ``update_weights``, which reads only ``.engine``."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
