"""The Ray task that builds and runs the trainer: verl's ``BaseTaskRunner`` with corewarding's worker, sampler
and trainer (``run_ppo(config, task_runner_class=CorewardingTaskRunner)``). GPU only.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import ray
from omegaconf import DictConfig, OmegaConf
from verl.trainer.main_ppo_v0 import BaseTaskRunner
from verl.trainer.ppo.utils import create_rl_dataset, create_rl_sampler, need_critic, need_reference_policy
from verl.utils.config import validate_config

from corewarding.training.verl import plugins  # noqa: F401  (registers the managers in this process too)
from corewarding.training.verl.data import PairedRandomSampler
from corewarding.training.verl.metrics import next_attempt_file
from corewarding.training.verl.trainer import CorewardingTrainer
from corewarding.training.verl.worker import CorewardingWorker

log = logging.getLogger(__name__)


def build_sampler(config: DictConfig, dataset: Any) -> Any:
    """verl's seeded random sampler, or the pair sampler that keeps both views of a question in one batch."""
    if config.corewarding.pairs:
        return PairedRandomSampler(len(dataset), int(config.data.seed))
    return create_rl_sampler(config.data, dataset)


@ray.remote(num_cpus=1)
class CorewardingTaskRunner(BaseTaskRunner):
    """Builds workers (``CorewardingWorker``), datasets, the sampler and ``CorewardingTrainer``, then trains."""

    def add_actor_rollout_worker(self, config: DictConfig) -> Any:
        before = set(self.role_worker_mapping)
        _, group_cls = super().add_actor_rollout_worker(config)
        for role in set(self.role_worker_mapping) - before:  # the actor/rollout(/ref) role verl chose
            self.role_worker_mapping[role] = ray.remote(CorewardingWorker)
        return CorewardingWorker, group_cls

    def run(self, config: DictConfig) -> None:
        from verl.utils.config import omega_conf_to_dataclass  # verl: imported when used
        from verl.utils.dataset.rl_dataset import collate_fn  # verl: imported when used
        from verl.workers.config import HFModelConfig  # verl: imported when used

        OmegaConf.resolve(config)
        os.environ["VERL_FILE_LOGGER_PATH"] = str(next_attempt_file(config.corewarding.verl_log_dir))
        self.add_actor_rollout_worker(config)
        self.add_critic_worker(config)
        self.add_reward_model_resource_pool(config)
        self.add_teacher_model_resource_pool(config)
        validate_config(config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))
        model_config: HFModelConfig = omega_conf_to_dataclass(config.actor_rollout_ref.model)
        tokenizer, processor = model_config.tokenizer, model_config.processor
        datasets = {
            split: create_rl_dataset(files, config.data, tokenizer, processor, is_train=split == "train")
            for split, files in (("train", config.data.train_files), ("val", config.data.val_files))
        }
        trainer = CorewardingTrainer(
            config=config,
            tokenizer=tokenizer,
            processor=processor,
            role_worker_mapping=self.role_worker_mapping,
            resource_pool_manager=self.init_resource_pool_mgr(config),
            train_dataset=datasets["train"],
            val_dataset=datasets["val"],
            collate_fn=collate_fn,
            train_sampler=build_sampler(config, datasets["train"]),
        )
        trainer.init_workers()
        trainer.fit()
