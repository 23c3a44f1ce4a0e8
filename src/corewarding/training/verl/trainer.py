"""``RayPPOTrainer`` with the paper's rewards (GPU only; the hook's data path is ``hook.py``, tested on CPU).

verl 0.9's reward loop scores one rollout at a time while it is generated (here: the strict GT score,
``corewarding_gt``). Votes need whole groups and Co-rewarding-II needs the teacher's rollouts, so the method's
reward is computed over the whole batch in the last overridable call before verl reads ``rm_scores``:
``_balance_batch``. There, per method:

* Co-rewarding-II: EMA-update the teacher (the reference worker; skipped by the frozen-teacher ablation), load it
  into vLLM, sample ``n`` teacher rollouts per prompt, put vLLM back to sleep (the actor's weights return at the
  step's normal weight sync). The reference worker, now the updated teacher, is the KL anchor.
* logits methods (Entropy, Self-Certainty): run the old-policy log-prob pass now (verl's own pass, which returns
  the entropy; when the method declares a statistic verl does not compute, the worker's pass that also returns it,
  as for Self-Certainty), reward from the statistic, and hand the cached result to verl's ``_compute_old_log_prob``
  call that follows.
* then the registered ``corewarding_<method>`` batch manager scores the batch; its rewards replace ``rm_scores``.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from verl import DataProto
from verl.trainer.ppo.ray_trainer import RayPPOTrainer
from verl.utils import tensordict_utils as tu
from verl.workers.reward_manager import get_reward_manager_cls
from verl.workers.utils.padding import left_right_2_no_padding, no_padding_2_padding

from corewarding import methods
from corewarding.files import write_jsonl_atomic
from corewarding.methods.co_rewarding_2 import ema_rate
from corewarding.run_folder import reward_dump_file
from corewarding.training.verl.batch import union_columns
from corewarding.training.verl.checkpoint_guard import check_pickles, resume_folder
from corewarding.training.verl.hook import ROW_KEY, manager_input, reward_rows, rm_scores_for, view_entropy
from corewarding.training.verl.metrics import export_metrics
from corewarding.training.verl.resume import write_step_manifest
from corewarding.training.verl.rewards import CorewardingRewardManager
from corewarding.training.verl.rotation import latest_step, rotate
from corewarding.training.verl.verl_config import VERL_STATISTICS, probed_statistics
from corewarding.training.verl.worker import STATISTICS_KEY

log = logging.getLogger(__name__)

METRIC_PREFIX = "corewarding/"


class CorewardingTrainer(RayPPOTrainer):
    """verl's PPO trainer with a method's group reward, its teacher and its logits statistics."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.cr = self.config.corewarding
        self.spec = methods.get(str(self.cr.method.reward))
        if not self.config.trainer.balance_batch:
            raise ValueError("trainer.balance_batch must stay true: the corewarding reward step runs there")
        manager_cls = get_reward_manager_cls(str(self.cr.reward_manager))
        if not issubclass(manager_cls, CorewardingRewardManager):
            raise TypeError(f"{self.cr.reward_manager} is not a corewarding batch reward manager")
        self.reward_manager = manager_cls(tokenizer=self.tokenizer, vote=self.cr.vote)
        self._gen_batch: DataProto | None = None
        self._old_log_prob: tuple[DataProto, float] | None = None
        self._step_metrics: dict[str, Any] | None = None

    # ---- hooks into RayPPOTrainer.fit ----------------------------------------------------------------------

    def _load_checkpoint(self) -> Any:
        """verl's resume, after the driver's own pickle (``data.pt``) passed the restricted unpickler; each worker
        checks its shards the same way before loading them."""
        folder = resume_folder(self.config.trainer)
        if folder is not None and (folder / "data.pt").is_file():
            check_pickles([folder / "data.pt"])
        return super()._load_checkpoint()

    def _save_checkpoint(self) -> None:
        """verl's save, then the step's manifest (written last: the save is complete, ``resume.py``), then the
        rotation verl leaves undone (teacher shards, data.pt, optimiser state of older saves, saves from before a
        resume), on every worker's node and the driver's."""
        super()._save_checkpoint()
        folder = str(self.config.trainer.default_local_dir)
        if latest_step(Path(folder)) == self.global_steps:  # verl recorded it (not an async save still writing)
            write_step_manifest(Path(folder) / f"global_step_{self.global_steps}")
        keep = self.config.trainer.get("max_actor_ckpt_to_keep")
        self.actor_rollout_wg.corewarding_rotate_checkpoints(folder, keep)
        rotate(Path(folder), keep)

    def _get_gen_batch(self, batch: DataProto) -> DataProto:
        gen_batch = super()._get_gen_batch(batch)
        self._gen_batch = gen_batch  # the prompts, for the teacher's rollouts of this step
        return gen_batch

    def _balance_batch(
        self, batch: DataProto, metrics: dict, logging_prefix: str = "global_seqlen", keep_minibatch: bool = False
    ) -> None:
        batch.non_tensor_batch[ROW_KEY] = np.array(list(range(len(batch))), dtype=object)  # like verl's columns
        self._step_metrics = metrics  # fit()'s dict for this step: the old-log-prob pass adds to it next
        super()._balance_batch(batch, metrics, logging_prefix=logging_prefix, keep_minibatch=keep_minibatch)
        self._reward_step(batch, metrics)

    def _compute_old_log_prob(self, batch: DataProto) -> Any:
        if self._old_log_prob is not None:  # computed by the reward step for this batch
            cached, self._old_log_prob = self._old_log_prob, None
            return cached
        old, mfu = super()._compute_old_log_prob(batch)
        if self.cr.pairs and self._step_metrics is not None:  # two views trained: each view's entropy too
            self._step_metrics.update(view_entropy(old.batch["entropys"], batch))
        return old, mfu

    def fit(self) -> None:
        try:
            super().fit()
        finally:
            export_metrics(self.cr.verl_log_dir, self.cr.metrics_file)
            self.reward_manager.close()

    # ---- the reward step -----------------------------------------------------------------------------------
    def _reward_step(self, batch: DataProto, metrics: dict) -> None:
        started = time.perf_counter()
        teacher, rate = self._teacher_rollouts() if self.spec.needs_teacher else (None, None)
        stat = self._logits_statistics(batch)[str(self.spec.logits_statistic)] if self.spec.kind == "logits" else None
        per_view = any(v.startswith("teacher_") for v in self.spec.views)  # Co-rewarding-III: teacher on each view
        data, order = manager_input(batch, teacher, stat, pairs=bool(self.cr.pairs), teacher_per_view=per_view)
        result = self.reward_manager(data, return_dict=True)
        assert isinstance(result, dict)
        if self.cr.get("reward_dump"):
            extra = result["reward_extra_info"]
            rows = reward_rows(data, extra["cr_reward"], extra["cr_rewarded"], self.tokenizer)
            write_jsonl_atomic(rows, reward_dump_file(Path(self.cr.run_dir), self.global_steps))
        batch.batch["rm_scores"] = rm_scores_for(result["reward_tensor"], order)
        ours = {**result["metrics"], "ema_rate": rate, "reward_step_seconds": time.perf_counter() - started}
        metrics.update({METRIC_PREFIX + k: v for k, v in ours.items() if v is not None})
        export_metrics(self.cr.verl_log_dir, self.cr.metrics_file)  # steps logged so far

    def _teacher_rollouts(self) -> tuple[DataProto, float | None]:
        """EMA-update the teacher (unless frozen), then sample n rollouts per prompt from it with vLLM."""
        ema = self.cr.method.teacher.ema
        rate = None
        if ema.enable and self.global_steps % int(ema.update_interval) == 0:
            rate = ema_rate(self.global_steps, self.total_training_steps, float(ema.alpha_start), float(ema.alpha_end))
            self.actor_rollout_wg.corewarding_ema_update(rate)
        if self._gen_batch is None:
            raise RuntimeError("no prompts recorded for the teacher's rollouts")
        n = int(self.config.actor_rollout_ref.rollout.n)
        teacher_in = self._gen_batch.repeat(repeat_times=n, interleave=True)
        teacher_in.meta_info["global_steps"] = self.global_steps
        import ray  # ray: imported when used

        # verl's agent loop drops the input's non-tensor columns (uid, reward_model, ...) when reward-loop workers
        # score the rollouts; fit() re-attaches them to its rollouts with ``union``, and so do we.
        columns = dict(teacher_in.non_tensor_batch)
        ray.get(self.actor_rollout_wg.corewarding_teacher_to_rollout(global_steps=self.global_steps))
        teacher_out = self.async_rollout_manager.generate_sequences(teacher_in)
        self.checkpoint_manager.sleep_replicas()  # type: ignore[attr-defined]  # built by init_workers
        teacher_out.meta_info.pop("timing", None)
        teacher_out.non_tensor_batch = union_columns(teacher_out.non_tensor_batch, columns)  # DataProto.union's
        return teacher_out, rate

    def _logits_statistics(self, batch: DataProto) -> dict[str, torch.Tensor]:
        """The old policy's per-token logits statistics the method declares, by name; caches the log-prob pass verl
        asks for next. verl's own pass returns the entropy; any other statistic needs the worker's pass.

        This runs inside ``_balance_batch``, before fit() sets ``global_token_num`` (the worker reports ``mfu``
        only with it), so it is set here from the balanced batch exactly as fit() then sets it.
        """
        batch.meta_info["global_token_num"] = torch.sum(batch.batch["attention_mask"], dim=-1).tolist()
        probed = probed_statistics(self.spec.name)
        if probed:
            old, mfu, stats = self._log_prob_with_stats(batch, probed)
        else:
            (old, mfu), stats = super()._compute_old_log_prob(batch), {}
        self._old_log_prob = (old, mfu)
        for name in self.spec.logits_statistics:
            if name in VERL_STATISTICS:
                stats[name] = old.batch[VERL_STATISTICS[name]]
        return stats

    def _log_prob_with_stats(
        self, batch: DataProto, names: tuple[str, ...]
    ) -> tuple[DataProto, float, dict[str, torch.Tensor]]:
        """verl's old-log-prob pass through the worker method that also returns the statistics ``names``."""
        batch_td = left_right_2_no_padding(batch.to_tensordict())
        tu.assign_non_tensor(batch_td, calculate_entropy=True, calculate_sum_pi_squared=False)
        tu.assign_non_tensor(batch_td, **{STATISTICS_KEY: ",".join(names)})
        output = self.actor_rollout_wg.corewarding_log_prob_with_stats(batch_td)
        padded = {
            k: no_padding_2_padding(tu.get(output, k), batch_td).float() for k in ("log_probs", "entropy", *names)
        }
        old = DataProto.from_tensordict(
            tu.get_tensordict({"old_log_probs": padded["log_probs"], "entropys": padded["entropy"]})
        )
        return old, tu.get(output, "metrics").get("mfu", 0.0), {name: padded[name] for name in names}
