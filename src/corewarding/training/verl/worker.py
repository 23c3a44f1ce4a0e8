"""verl's actor/rollout/reference worker with the three operations the paper's methods add (GPU only).

* ``corewarding_ema_update``: Co-rewarding-II's EMA of the teacher (verl's reference module) towards the actor,
  on each rank's FSDP shards (``teacher.ema_update_shards``).
* ``corewarding_teacher_to_rollout``: load the teacher's weights into the rollout engine (verl's own
  ``update_weights`` path, reading the reference engine instead of the actor's), so the teacher samples with vLLM.
* ``corewarding_log_prob_with_stats``: verl's log-prob pass, also returning the per-token logits statistics the
  trainer names (``methods.logits_statistics``; Self-Certainty's) computed from the same temperature-scaled logits
  (through the engine's logits-processor hook).

Checkpoints additionally hold the teacher's shards (verl saves only the actor).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

import torch
from tensordict import TensorDict
from verl.single_controller.base.decorator import Dispatch, make_nd_compute_dataproto_dispatch_fn, register
from verl.utils import tensordict_utils as tu
from verl.utils.device import get_device_id
from verl.utils.torch_dtypes import PrecisionType
from verl.workers.engine_workers import ActorRolloutRefWorker
from verl.workers.utils.losses import ppo_loss

from corewarding.methods.logits_rewards import DEFAULT_CHUNK_TOKENS
from corewarding.methods.logits_statistics import logits_statistic
from corewarding.training.verl.checkpoint_guard import check_optimizer_state, check_pickles, rank_shards
from corewarding.training.verl.phase_memory import measured
from corewarding.training.verl.rollout_weights import CastWeights, EngineHolder
from corewarding.training.verl.rotation import rotate
from corewarding.training.verl.teacher import (
    ema_update_shards,
    load_teacher_shards,
    save_teacher_shards,
    shard_fingerprint,
    teacher_file,
)
from corewarding.training.verl.view_loss import SWITCH_KEY, row_views, tag_views, view_sum_ppo_loss

log = logging.getLogger(__name__)

ONE_TO_ALL: Any = Dispatch.ONE_TO_ALL  # type: ignore[attr-defined]  # verl adds Dispatch members at import

# optional actor_rollout_ref key (default DEFAULT_CHUNK_TOKENS): the chunk of every chunked statistic the probe
# computes; named when Self-Certainty was the only one, kept so the verl config stays the same
CHUNK_KEY = "corewarding_self_certainty_chunk_tokens"
STATISTICS_KEY = "corewarding_logits_statistics"  # the log-prob pass's input: the statistics' names, comma-joined


class LogitsStatisticsProbe:
    """Stands in for the loss function during a forward-only pass.

    The engine calls it twice per micro-batch: with ``student_logits`` (the temperature-scaled logits, shape
    ``(1, tokens, vocab)``) to collect extra per-token outputs, one per statistic under its name, then as the loss,
    which is not needed here. A chunked statistic (Self-Certainty) is computed ``chunk_tokens`` positions at a time,
    so only one chunk is ever upcast to fp32.
    """

    def __init__(self, names: Sequence[str], chunk_tokens: int | None = DEFAULT_CHUNK_TOKENS) -> None:
        self.statistics = [logits_statistic(name) for name in names]
        self.chunk_tokens = chunk_tokens

    def __call__(self, student_logits: torch.Tensor | None = None, **kwargs: Any) -> Any:
        if student_logits is not None:
            with torch.no_grad():
                logits = student_logits.detach()
                return {s.name: s.compute(logits, self.chunk_tokens) for s in self.statistics}
        device = kwargs["data"]["input_ids"].device if "data" in kwargs else None
        return torch.zeros((), device=device), {}


class CorewardingWorker(ActorRolloutRefWorker):
    """``ActorRolloutRefWorker`` plus the teacher EMA, teacher rollouts and the logits-statistics pass."""

    def _has_teacher(self) -> bool:
        return bool(self.config.get("corewarding_teacher", False)) and self.ref is not None

    def _engines(self) -> tuple[Any, Any]:
        """The actor's and the reference's training workers (both exist on an actor_rollout_ref worker)."""
        if self.actor is None or self.ref is None:
            raise RuntimeError("the teacher needs the actor and the reference model on this worker")
        return self.actor, self.ref

    @register(dispatch_mode=ONE_TO_ALL)
    def corewarding_ema_update(self, rate: float) -> int:
        """teacher <- (1 - rate) teacher + rate actor, in place on this rank's shards."""
        actor, ref = self._engines()
        return ema_update_shards(ref.engine.module, actor.engine.module, float(rate))

    @register(dispatch_mode=ONE_TO_ALL, blocking=False)
    async def corewarding_teacher_to_rollout(self, global_steps: int | None = None) -> None:
        """Load the teacher's weights into the sleeping rollout engine and wake it (verl's naive sync path), cast to
        the rollout's dtype on this side (``rollout_weights``: verl would send the fp32 teacher as is)."""
        actor, ref = self._engines()
        dtype = PrecisionType.to_dtype(str(self.config.rollout.dtype))
        # update_weights reads self.actor.engine only; the teacher's engine has the same interface
        self.actor = EngineHolder(CastWeights(ref.engine, dtype))  # type: ignore[assignment]  # a stand-in: reads .engine
        try:
            await self.update_weights(global_steps=global_steps, mode="naive")
        finally:
            self.actor = actor

    @register(dispatch_mode=make_nd_compute_dataproto_dispatch_fn(mesh_name="actor"))
    @measured("old_log_prob")
    def corewarding_log_prob_with_stats(self, data: TensorDict) -> TensorDict | None:
        """The actor's log-prob pass (log-probs, entropy) plus, per token, each logits statistic the input names
        (``STATISTICS_KEY``) of the same logits, under its name."""
        actor: Any = self.actor
        names = tu.get(data, STATISTICS_KEY)
        if not names:
            raise ValueError(f"the log-prob pass needs {STATISTICS_KEY}: the names of the statistics to compute")
        probe = LogitsStatisticsProbe(str(names).split(","), int(self.config.get(CHUNK_KEY, DEFAULT_CHUNK_TOKENS)))
        tu.assign_non_tensor(data, distillation_use_topk=True, distillation_only=False, compute_loss=True)
        loss_fn = actor.loss_fn
        actor.loss_fn = probe
        try:
            output = actor.infer_batch(data)
        finally:
            actor.loss_fn = loss_fn
        return output.cpu() if output is not None else None

    def _sum_over_dp(self, counts: torch.Tensor) -> None:
        """Sum a CPU tensor over the actor's data-parallel ranks, in place."""
        group = self.actor.engine.get_data_parallel_group()  # type: ignore[union-attr]  # init_model built the actor
        on_device = counts.to(get_device_id())
        torch.distributed.all_reduce(on_device, op=torch.distributed.ReduceOp.SUM, group=group)
        counts.copy_(on_device.cpu())

    @register(dispatch_mode=make_nd_compute_dataproto_dispatch_fn(mesh_name="actor"))
    @measured("old_log_prob")
    def compute_log_prob(self, data: TensorDict) -> TensorDict | None:
        """verl's, measured when ``COREWARDING_PHASE_MEMORY`` is set (``phase_memory``)."""
        return super().compute_log_prob(data)

    @register(dispatch_mode=make_nd_compute_dataproto_dispatch_fn(mesh_name="ref"))
    @measured("ref_log_prob")
    def compute_ref_log_prob(self, data: TensorDict) -> TensorDict | None:
        """verl's, measured when ``COREWARDING_PHASE_MEMORY`` is set (``phase_memory``)."""
        return super().compute_ref_log_prob(data)

    @register(dispatch_mode=make_nd_compute_dataproto_dispatch_fn(mesh_name="actor"))
    @measured("update")
    def update_actor(self, data: TensorDict) -> TensorDict | None:
        """verl's update; with ``actor_rollout_ref.corewarding_view_sum_loss`` (set for pair cells, Co-rewarding-I)
        trained on the sum of its per-view token-means (``view_loss``).

        The switch comes from the config, the same on every rank, never from a rank's rows: a rank whose shard holds
        one view still joins the all-reduce of the per-view token counts.
        """
        if not self.config.get(SWITCH_KEY, False):
            return super().update_actor(data)
        views = row_views(data)
        actor: Any = self.actor
        loss_fn = actor.loss_fn
        if getattr(loss_fn, "func", None) is not ppo_loss:  # e.g. verl's distillation loss: left as verl built it
            raise ValueError(f"{SWITCH_KEY}: the per-view sum wraps verl's ppo_loss only, not {loss_fn!r}")
        tag_views(data, views, self._sum_over_dp)
        actor.loss_fn = partial(view_sum_ppo_loss, config=loss_fn.keywords["config"])
        try:
            return super().update_actor(data)
        finally:
            actor.loss_fn = loss_fn

    @register(dispatch_mode=ONE_TO_ALL)
    @measured("save")
    def save_checkpoint(
        self, local_path: str, hdfs_path: str | None = None, global_step: int = 0, max_ckpt_to_keep: int | None = None
    ) -> None:
        super().save_checkpoint(local_path, hdfs_path, global_step, max_ckpt_to_keep)
        if self._has_teacher():
            save_teacher_shards(self._engines()[1].engine.module, teacher_file(local_path, self.rank))

    @register(dispatch_mode=ONE_TO_ALL)
    def load_checkpoint(
        self, local_path: str, hdfs_path: str | None = None, del_local_after_load: bool = False
    ) -> None:
        rank, world = torch.distributed.get_rank(), torch.distributed.get_world_size()
        check_optimizer_state(Path(local_path), rank, world, list(self.config.actor.checkpoint.load_contents))
        shards = rank_shards(Path(local_path), rank, world)
        if self._has_teacher():  # the teacher's shard is a pickle too (loaded with weights_only, checked the same)
            shards.append(teacher_file(local_path, self.rank))
        check_pickles(path for path in shards if path.is_file())
        super().load_checkpoint(local_path, hdfs_path, del_local_after_load)
        actor: Any = self.actor  # verl types its engine as BaseEngine, which declares no module
        if actor is None:
            raise RuntimeError("no actor on this worker to load a checkpoint into")
        loaded = f"policy {shard_fingerprint(actor.engine.module.state_dict())}"
        if self._has_teacher():
            teacher = self._engines()[1].engine.module
            load_teacher_shards(teacher, teacher_file(local_path, self.rank))
            loaded += f", teacher {shard_fingerprint(dict(teacher.named_parameters()))}"
        # what this rank holds now, comparable with the saved files (teacher.shard_fingerprint): a resume is checkable
        log.info("rank %d resumed from %s: %s", rank, local_path, loaded)

    @register(dispatch_mode=ONE_TO_ALL)
    def corewarding_rotate_checkpoints(self, checkpoints_dir: str, keep: int | None) -> int:
        """After a complete save: the rotation of ``rotation.rotate`` on this rank's node (each node holds its own
        ranks' shards); returns how many paths it removed."""
        return len(rotate(Path(checkpoints_dir), keep))
