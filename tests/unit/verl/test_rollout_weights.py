"""The teacher reaches vLLM in the rollout's dtype: ``CorewardingWorker.corewarding_teacher_to_rollout`` runs verl's
own ``update_weights`` on the teacher's engine wrapped so that its fp32 weights are cast before they are sent (verl
sends what the engine yields, uncast: 4 bytes per parameter of an 8B teacher is ~33 GB a step)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import torch
from omegaconf import OmegaConf

from corewarding.training.verl.rollout_weights import CastWeights, cast_floating
from corewarding.training.verl.worker import CorewardingWorker


class FakeEngine:
    """verl's FSDPEngine as update_weights uses it: per-tensor weights (fp32, gathered) and the offload flag."""

    is_param_offload_enabled = False

    def __init__(self, weights: dict[str, torch.Tensor]) -> None:
        self.weights = weights
        self.calls: list[dict[str, Any]] = []

    def get_per_tensor_param(self, layered_summon: bool = False, base_sync_done: bool = False) -> tuple[Any, None]:
        self.calls.append({"layered_summon": layered_summon, "base_sync_done": base_sync_done})
        return ((name, w) for name, w in self.weights.items()), None


def test_floating_weights_are_cast_one_at_a_time_and_others_kept() -> None:
    weights = {"w": torch.tensor([1.0 + 2**-9, 3.0]), "step": torch.tensor([7]), "b": torch.tensor([0.5])}
    engine = CastWeights(FakeEngine(weights), torch.bfloat16)
    params, peft = engine.get_per_tensor_param(base_sync_done=True)
    sent = dict(params)
    assert peft is None and {k: v.dtype for k, v in sent.items()} == {
        "w": torch.bfloat16,
        "step": torch.int64,
        "b": torch.bfloat16,
    }
    assert sent["w"].tolist() == [1.0, 3.0]  # 1 + 2^-9 rounds to nearest even, as vLLM's copy_ into bf16 rounds
    assert torch.equal(sent["w"], torch.empty(2, dtype=torch.bfloat16).copy_(weights["w"]))
    assert engine.is_param_offload_enabled is False  # the rest of the engine passes through
    same = torch.tensor([1.0], dtype=torch.bfloat16)
    assert next(cast_floating([("x", same)], torch.bfloat16))[1] is same  # already in the dtype: not copied


def test_the_teacher_push_sends_the_rollout_dtype_and_restores_the_actor() -> None:
    teacher = FakeEngine({"model.embed_tokens.weight": torch.randn(4, 3), "lm_head.weight": torch.randn(4, 3)})
    actor = SimpleNamespace(engine=FakeEngine({"model.embed_tokens.weight": torch.zeros(4, 3)}))
    received: list[tuple[str, torch.Tensor]] = []

    async def update_weights(global_steps: int | None = None, mode: str = "auto") -> None:
        """verl's naive path: reads self.actor.engine, sends what get_per_tensor_param yields."""
        assert mode == "naive"
        params, _ = fake.actor.engine.get_per_tensor_param(layered_summon=False, base_sync_done=True)
        received.extend(params)
        assert fake.actor.engine.is_param_offload_enabled is False

    fake = SimpleNamespace(
        actor=actor,
        config=OmegaConf.create({"rollout": {"dtype": "bfloat16"}}),
        update_weights=update_weights,
        _engines=lambda: (actor, SimpleNamespace(engine=teacher)),
    )
    asyncio.run(CorewardingWorker.corewarding_teacher_to_rollout(fake, global_steps=3))  # type: ignore[arg-type]
    assert [name for name, _ in received] == ["model.embed_tokens.weight", "lm_head.weight"]
    for name, tensor in received:
        assert tensor.dtype == torch.bfloat16 and torch.equal(tensor, teacher.weights[name].to(torch.bfloat16))
    assert fake.actor is actor and teacher.calls == [{"layered_summon": False, "base_sync_done": True}]
    sent = sum(t.numel() * t.element_size() for _, t in received)
    assert sent == 2 * 4 * 3 * 2  # half of the fp32 teacher's 96 bytes
