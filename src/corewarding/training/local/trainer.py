"""GRPO on one device (CPU by default) driving the method cores: the embedded default and the test oracle.

Per step: sample B prompts; G rollouts per prompt and view; for Co-rewarding-II, update the EMA teacher and let it
sample the label rollouts; old and reference log-probs; rewards from the method core; GRPO advantages per (uid, view);
one optimizer step on the PPO clip loss plus the k3 KL loss, token-mean per micro-batch, views summed.
"""

from __future__ import annotations

import copy
import json
import logging
import math
import os
import random
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf
from tqdm.auto import tqdm
from transformers import PreTrainedModel
from transformers.utils import logging as transformers_logging

from corewarding import matrix, methods
from corewarding.grading.answers import strict_score
from corewarding.lm.loading import load_base_model
from corewarding.lm.rollout import RolloutBatch, Sampling, chat_prompts, generate, token_logprobs
from corewarding.methods.base import VIEW_TAGS
from corewarding.methods.co_rewarding_2 import ema_rate
from corewarding.methods.grpo import grpo_advantages
from corewarding.methods.voting import voter_from_config
from corewarding.run_folder import METRICS, VERL_INPUTS, checkpoints_dir, config_file
from corewarding.schemas import (
    GrpoConfig,
    MethodConfig,
    OptimizerConfig,
    PathsConfig,
    ScheduleConfig,
    section_of,
)
from corewarding.training import run_record
from corewarding.training.common import RunResult, accepted_config_hashes, cell_of, total_steps, training_config_hash
from corewarding.training.errors import RunWriteError, TrainingInterrupted
from corewarding.training.inputs import TrainingRows, load_training_rows
from corewarding.training.local import checkpoint as ckpt
from corewarding.training.local.losses import (
    StepLossMetrics,
    low_var_kl,
    masked_token_mean,
    ppo_clip_loss,
)
from corewarding.training.local.restored_state import optimizer_settings
from corewarding.training.local.run_lock import run_lock
from corewarding.training.local.teacher import ema_update
from corewarding.training.rewards import score_step

log = logging.getLogger(__name__)

STEP_STATISTICS = ("entropy",)  # logits statistics every step computes, whatever the method reads: entropy_mean


def batch_indices(n_rows: int, batch_size: int, data_seed: int, step: int) -> list[int]:
    """The rows of 0-based step ``step``: a seeded permutation per epoch, drop_last (the data position is the step)."""
    per_epoch = n_rows // batch_size
    epoch, offset = divmod(step, per_epoch)
    generator = torch.Generator().manual_seed(data_seed)
    for _ in range(epoch + 1):
        perm = torch.randperm(n_rows, generator=generator)
    return perm[offset * batch_size : (offset + 1) * batch_size].tolist()


def _seed_everything(seed: int) -> None:
    torch.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed)


def _frozen_copy(model: PreTrainedModel, dtype: torch.dtype | None = None) -> PreTrainedModel:
    clone = copy.deepcopy(model)
    if dtype is not None:
        clone = clone.to(dtype)  # type: ignore[arg-type]  # transformers 5 types the wrapped .to oddly
    clone.eval()
    for p in clone.parameters():
        p.requires_grad_(False)
    return clone


class LocalTrainer:
    """One run of one cell on one device."""

    def __init__(self, cfg: DictConfig, run_dir: Path, progress: bool = True, trust_unverified: bool = False) -> None:
        self.cfg = cfg
        self.run_dir = run_dir
        self.progress = progress
        self.trust_unverified = trust_unverified  # resume from a checkpoint without a manifest
        self.method = section_of(cfg, MethodConfig)
        self.spec = methods.get(self.method.reward)
        if cfg.torch_threads:
            torch.set_num_threads(int(cfg.torch_threads))
        self.policy, self.tokenizer = load_base_model(cfg)
        # Seed after loading: building the tiny model in this process draws random numbers, and a run must not
        # depend on whether the model was already built.
        _seed_everything(int(cfg.seed))
        self.rows: TrainingRows = load_training_rows(cfg, self.tokenizer)
        self.total_steps = total_steps(cfg, len(self.rows.train))
        teacher_cfg = self.method.teacher
        self.teacher = _frozen_copy(self.policy, getattr(torch, teacher_cfg.dtype)) if teacher_cfg else None
        self.ref = self.teacher if self.teacher is not None else _frozen_copy(self.policy)
        self.grpo, self.schedule = section_of(cfg, GrpoConfig), section_of(cfg, ScheduleConfig)
        optimizer = section_of(cfg, OptimizerConfig)
        self.settings = optimizer_settings(optimizer, self.total_steps)  # a resumed checkpoint must agree
        self.grad_clip = float(optimizer.grad_clip)
        s = self.settings
        self.optimizer = torch.optim.AdamW(
            self.policy.parameters(), lr=s.lr, betas=s.betas, eps=s.eps, weight_decay=s.weight_decay
        )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, s.factor)
        g = self.grpo
        self.sampling = Sampling(int(g.n), int(g.max_response_length), g.temperature, g.top_p, int(g.top_k))
        self.voter = voter_from_config(cfg.vote)  # methods.voting reads a mapping (the verl plug-in passes one)
        self.config_hash = training_config_hash(cfg)
        self.start_step = self._resume_or_start()
        self.step = self.saved_step = self.start_step  # the step under way, the newest checkpoint's

    # ---- setup -------------------------------------------------------------------------------------------------
    def _resume_or_start(self) -> int:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._write_inputs_report()
        checkpoints = checkpoints_dir(self.run_dir)
        state = ckpt.resume(
            checkpoints, accepted_config_hashes(self.cfg), self.policy, self.optimizer, self.scheduler, self.settings,
            self.teacher, self.trust_unverified,
        )  # fmt: skip
        if state is None:
            config_file(self.run_dir).write_text(OmegaConf.to_yaml(self.cfg))
            (self.run_dir / METRICS).unlink(missing_ok=True)
            return 0
        self._truncate_metrics(state.step)
        log.info("resumed %s from step %d", self.run_dir, state.step)
        return state.step

    def _write_inputs_report(self) -> None:
        """``inputs.json``: the rows this run trains and validates on, and the rows dropped with the reason."""
        report = {
            "train_rows": len(self.rows.train),
            "rephrased_rows": None if self.rows.rephrased is None else len(self.rows.rephrased),
            "val_rows": len(self.rows.val),
            "dropped": self.rows.dropped,
            "prompt_filter": self.rows.prompt_filter,
            "total_steps": self.total_steps,
        }
        (self.run_dir / VERL_INPUTS).write_text(json.dumps(report, indent=2) + "\n")

    def _truncate_metrics(self, step: int) -> None:
        path = self.run_dir / METRICS
        if path.is_file():
            kept = [line for line in path.read_text().splitlines() if line and json.loads(line)["step"] <= step]
            path.write_text("".join(line + "\n" for line in kept))

    # ---- one step ----------------------------------------------------------------------------------------------
    def _rollouts(self, step: int) -> tuple[dict[str, RolloutBatch], float | None]:
        idx = batch_indices(len(self.rows.train), int(self.grpo.train_batch_size), self._data_seed(), step - 1)
        uids = [f"s{step}-r{i}" for i in idx]
        views = {"original": [self.rows.train[i] for i in idx]}
        if self.rows.rephrased is not None and "rephrased" in self.spec.views:
            views["rephrased"] = [self.rows.rephrased[i] for i in idx]
        batches = {}
        self.policy.eval()
        for view, rows in views.items():
            batches[view] = self._generate(self.policy, rows, uids, view)
        rate = None
        if self.teacher is not None and self.method.teacher is not None:
            ema = self.method.teacher.ema
            if ema.enable and step % ema.update_interval == 0:
                rate = ema_rate(step, self.total_steps, ema.alpha_start, ema.alpha_end)
                ema_update(self.teacher, self.policy, rate)
            for view, name in self._teacher_views(views):
                batches[name] = self._generate(self.teacher, views[view], uids, name)
        return batches, rate

    def _teacher_views(self, views: dict[str, list[dict[str, Any]]]) -> list[tuple[str, str]]:
        """(policy view, teacher view) pairs the teacher samples: ``teacher`` on the original prompts (II), or
        ``teacher_<view>`` on each policy view's prompts (III)."""
        if "teacher" in self.spec.views:
            return [("original", "teacher")]
        return [(view, f"teacher_{view}") for view in views if f"teacher_{view}" in self.spec.views]

    def _generate(
        self,
        model: PreTrainedModel,
        rows: list[dict[str, Any]],
        uids: list[str],
        view: str,
        sampling: Sampling | None = None,
    ) -> RolloutBatch:
        prompts = chat_prompts(self.tokenizer, [r["prompt"] for r in rows])
        truths = [r["reward_model"].get("ground_truth") for r in rows]
        return generate(model, self.tokenizer, prompts, uids, truths, sampling or self.sampling, view)

    def _data_seed(self) -> int:
        return int(self.cfg.seed if self.method.data_seed is None else self.method.data_seed)

    @staticmethod
    def _micro_slices(n: int, size: int) -> list[slice]:
        return [slice(i, min(i + size, n)) for i in range(0, n, size)]

    @torch.no_grad()
    def _score_tokens(self, batch: RolloutBatch) -> None:
        """``batch.stats``: old and reference log-probs, and per token every logits statistic the step needs."""
        temperature = float(self.grpo.temperature)
        names = tuple(dict.fromkeys((*STEP_STATISTICS, *self.spec.logits_statistics)))
        parts: dict[str, list[torch.Tensor]] = {"old_logp": [], "ref_logp": [], **{name: [] for name in names}}
        for rows in self._micro_slices(len(batch.uids), int(self.grpo.log_prob_micro_batch_size)):
            logp, stats = token_logprobs(self.policy, batch, rows, temperature, names)
            ref_logp, _ = token_logprobs(self.ref, batch, rows, temperature)
            parts["old_logp"].append(logp)
            parts["ref_logp"].append(ref_logp)
            for name in names:
                parts[name].append(stats[name])
        batch.stats = {k: torch.cat(v) for k, v in parts.items()}

    def _update(self, batches: list[RolloutBatch], advantages: list[torch.Tensor]) -> dict[str, float]:
        """One optimizer step: per micro-batch, the views' (PPO + kl_coef * KL) token-means summed, / grad-accum; the
        metrics are ``StepLossMetrics``'s (docs/training.md, "What the loss metrics mean")."""
        g = self.grpo
        self.policy.train()
        slices = self._micro_slices(len(batches[0].uids), int(g.micro_batch_size))
        metrics = StepLossMetrics(len(slices))
        for rows in slices:
            loss = torch.zeros(())
            for batch, adv in zip(batches, advantages, strict=True):
                mask = batch.response_mask[rows]
                logp, _ = token_logprobs(self.policy, batch, rows, float(g.temperature))
                token_adv = adv[rows].unsqueeze(-1).expand_as(logp)
                pg, stats = ppo_clip_loss(
                    logp, batch.stats["old_logp"][rows], token_adv, mask,
                    g.clip_ratio_low, g.clip_ratio_high, g.clip_ratio_c,
                )  # fmt: skip
                kl = masked_token_mean(low_var_kl(logp, batch.stats["ref_logp"][rows]), mask)
                loss = loss + pg + (float(g.kl_coef) * kl if g.use_kl_loss else 0.0)
                metrics.add(batch.view, pg.item(), kl.item(), stats)
            metrics.end_micro_batch()
            (loss / len(slices)).backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(self.policy.parameters(), self.grad_clip)
        lr = self.scheduler.get_last_lr()[0]
        if torch.isfinite(grad_norm):
            self.optimizer.step()
        else:
            log.warning("non-finite gradient norm; optimizer step skipped")
        self.optimizer.zero_grad(set_to_none=True)
        self.scheduler.step()
        # pg_loss, kl_mean: the views' terms summed, as optimised; two views: each view's too (pg_loss_ori, ...)
        return {**metrics.result(), "grad_norm": float(grad_norm), "lr": float(lr)}

    def train_step(self, step: int) -> dict[str, Any]:
        started = time.perf_counter()
        batches, rate = self._rollouts(step)
        trained = [b for v, b in batches.items() if v in self.spec.rewarded_views]
        for batch in trained:
            self._score_tokens(batch)
        rewards, label_metrics = score_step(self.spec, batches, self.voter)
        advantages = [
            grpo_advantages(rewards[b.view], b.uids, float(self.grpo.adv_epsilon), bool(self.grpo.norm_adv_by_std)).to(
                b.response_ids.device
            )
            for b in trained
        ]
        update = self._update(trained, advantages)
        lengths = torch.cat([b.lengths for b in trained]).float()
        masks = torch.cat([b.response_mask.flatten() for b in trained])
        entropy = torch.cat([b.stats["entropy"].flatten() for b in trained])
        metrics: dict[str, Any] = {
            "step": step,
            "epoch": (step - 1) // max(1, len(self.rows.train) // int(self.grpo.train_batch_size)),
            "reward_mean": float(torch.cat([rewards[b.view].cpu() for b in trained]).mean()),
            **label_metrics,
            "response_length_mean": float(lengths.mean()),
            "truncation_rate": float(np.mean([t for b in trained for t in b.truncated])),
            "entropy_mean": float(masked_token_mean(entropy, masks)),
            **self._entropy_per_view(trained),
            **update,
            "ema_rate": rate,
        }
        counts = self.voter.checker_counts()
        if counts:  # cumulative math-verify timeouts/errors: each counted as "not equal", never fatal
            metrics["math_verify_timeouts"] = counts.get("timeout", 0)
            metrics["math_verify_errors"] = counts.get("error", 0)
        metrics["step_seconds"] = time.perf_counter() - started
        return metrics

    def _entropy_per_view(self, trained: list[RolloutBatch]) -> dict[str, float]:
        """``entropy_mean_ori`` / ``_aug`` when the step trains two views (Co-rewarding-I, III); else nothing."""
        if len(trained) < 2:
            return {}
        return {
            f"entropy_mean_{VIEW_TAGS[b.view]}": float(masked_token_mean(b.stats["entropy"], b.response_mask))
            for b in trained
        }

    # ---- validation, the loop ----------------------------------------------------------------------------------
    @torch.no_grad()
    def validate(self) -> float:
        """Greedy accuracy on the validation rows under the strict ground-truth reward."""
        self.policy.eval()
        greedy = Sampling(1, int(self.grpo.max_response_length), greedy=True)
        scores = []
        for start in range(0, len(self.rows.val), 32):
            rows = self.rows.val[start : start + 32]
            batch = self._generate(self.policy, rows, [str(i) for i in range(len(rows))], "original", greedy)
            scores += [
                0.0 if t is None else strict_score(x, t) for x, t in zip(batch.texts, batch.ground_truths, strict=True)
            ]
        return float(np.mean(scores)) if scores else 0.0

    def _append_metrics(self, metrics: dict[str, Any]) -> None:
        append_line(self.run_dir / METRICS, metrics_line(metrics))

    def run(self) -> RunResult:
        started = time.perf_counter()
        sched = self.schedule
        if self.start_step == 0 and sched.val_before_train:
            self._append_metrics({"step": 0, "val_accuracy": self.validate()})
        bar = tqdm(
            range(self.start_step + 1, self.total_steps + 1),
            desc=self.method.name, initial=self.start_step, total=self.total_steps,
            disable=not self.progress, leave=False,
        )  # fmt: skip
        for step in bar:
            self.step = step
            metrics = self.train_step(step)
            if step % int(sched.test_freq) == 0 or step == self.total_steps:
                metrics["val_accuracy"] = self.validate()
            self._append_metrics(metrics)
            bar.set_postfix(reward=f"{metrics['reward_mean']:.3f}")
            if step % int(sched.save_freq) == 0 or step == self.total_steps:
                state = ckpt.TrainerState(step, self.total_steps, self.config_hash)
                ckpt.save_checkpoint(
                    checkpoints_dir(self.run_dir), state, self.policy, self.tokenizer,
                    self.optimizer, self.scheduler, self.teacher,
                )  # fmt: skip
                self.saved_step = step
        lines = (self.run_dir / METRICS).read_text().splitlines()
        return RunResult(self.run_dir, self.total_steps, time.perf_counter() - started, [json.loads(x) for x in lines])


def metrics_line(metrics: dict[str, Any]) -> str:
    """One metrics.jsonl line; a non-finite figure (a NaN gradient norm) is written null, which ingest accepts as
    missing (it refuses NaN and Infinity)."""
    finite = {k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in metrics.items()}
    return json.dumps(finite, allow_nan=False)


def append_line(path: Path, line: str) -> None:
    """Append one line to ``path`` whole or not at all: a failed write (a full disk) cuts the file back to what it held
    and raises RunWriteError naming the path, so no half line is left for a reader or a resume to trip on."""
    data = (line + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    size = os.fstat(fd).st_size
    try:
        written = 0
        while written < len(data):  # a write near a size limit may take only part of the line
            written += os.write(fd, data[written:])
    except OSError as exc:
        os.ftruncate(fd, size)
        free = shutil.disk_usage(path.parent).free
        raise RunWriteError(
            f"cannot append to {path} ({exc.strerror or exc}): it needs {len(data)} bytes, {free / 1e6:.1f} MB "
            f"free in {path.parent}; free space and run the same command to resume"
        ) from exc
    finally:
        os.close(fd)


def train(
    cfg: DictConfig, run_dir: Path | None = None, progress: bool = True, trust_unverified: bool = False
) -> RunResult:
    """Train ``cfg``'s cell with the local backend into ``run_dir`` (default ``{paths.runs_dir}/{cell_id}``);
    ``trust_unverified`` resumes from a checkpoint without a manifest (one written before manifests existed).

    The run folder is locked for the whole run: a second trainer on it raises RunInUseError before touching it.
    Ctrl-C records the run ``interrupted`` and raises TrainingInterrupted (a KeyboardInterrupt) saying where."""
    transformers_logging.disable_progress_bar()
    target = Path(run_dir or matrix.run_dir(cell_of(cfg), section_of(cfg, PathsConfig).runs_dir))
    with run_lock(target):
        trainer = LocalTrainer(cfg, target, progress=progress, trust_unverified=trust_unverified)
        run_record.record_start(trainer.run_dir, cfg, trainer.config_hash, cell_of(cfg).cell_id)
        try:
            result = trainer.run()
        except KeyboardInterrupt as exc:
            run_record.record_end(trainer.run_dir, "interrupted")
            raise TrainingInterrupted(trainer.step, trainer.saved_step) from exc
        except BaseException as exc:
            try:
                run_record.record_end(trainer.run_dir, "failed", exc)
            except OSError as record_exc:  # a disk still full: the run's own error is the one to report
                log.error("could not mark %s failed: %s", trainer.run_dir / run_record.RUN_RECORD, record_exc)
            raise
        finally:
            trainer.voter.close()
        run_record.record_end(trainer.run_dir, "finished")
    return result
