"""Translate a composed corewarding config into verl's own ``ppo_trainer`` config.

verl's config tree is composed offline with Hydra (once per process, it takes ~0.4 s), then our values are set on
it key by key; a key verl does not have is an error, so a verl upgrade that renames one fails loudly here. The
result carries a ``corewarding`` section the plug-ins read (the method, the vote, where the run writes).
"""

from __future__ import annotations

import copy
import functools
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig, OmegaConf, open_dict

from corewarding import methods
from corewarding.config import ConfigError, teacher_dtype_problem
from corewarding.run_folder import CHECKPOINTS, VERL_DATA, VERL_LOGS, metrics_file
from corewarding.schemas import (
    BaseModelConfig,
    GrpoConfig,
    MethodConfig,
    OptimizerConfig,
    ScheduleConfig,
    VerlConfig,
    section_of,
)
from corewarding.training.common import cell_of
from corewarding.training.verl.attention import Attention, choose_attention

PLUGIN_MODULE = "corewarding.training.verl.plugins"
GT_LOOP_MANAGER = "corewarding_gt"
VERL_GRPO_EPSILON = 1e-6  # compute_grpo_outcome_advantage's fixed epsilon
TORCH_TO_VERL_DTYPE = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}
# Keys verl's tree lacks that the translation adds on purpose.
NEW_KEYS = (
    "corewarding",
    "ray_kwargs.ray_init.runtime_env.env_vars",
    "ray_kwargs.ray_init.address",
    "ray_kwargs.ray_init.num_gpus",
    "ray_kwargs.ray_init._node_ip_address",
    "ray_kwargs.ray_init.include_dashboard",
    "actor_rollout_ref.rollout.enable_sleep_mode",
    "actor_rollout_ref.corewarding_teacher",
    "actor_rollout_ref.corewarding_view_sum_loss",
    "actor_rollout_ref.corewarding_self_certainty_chunk_tokens",
)
RAY_ADDRESS_ENV = "RAY_ADDRESS"
ENV_VARS = "ray_kwargs.ray_init.runtime_env.env_vars"  # what every Ray worker of the run gets in its environment
# The logits statistics verl's own old-log-prob pass returns (it computes the entropy for every method), by the
# column of that pass's DataProto that holds it; the worker's probe computes any other statistic a method declares.
VERL_STATISTICS = {"entropy": "entropys"}


def probed_statistics(reward: str) -> tuple[str, ...]:
    """The logits statistics of method ``reward`` that the worker's probe computes (not verl's own)."""
    return tuple(name for name in methods.get(reward).logits_statistics if name not in VERL_STATISTICS)


@functools.lru_cache(maxsize=1)
def _verl_base() -> DictConfig:
    import verl  # verl: imported when used

    config_dir = Path(verl.__file__).parent / "trainer" / "config"
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(config_dir), version_base=None):
            return compose(config_name="ppo_trainer")
    finally:
        GlobalHydra.instance().clear()


def verl_base_config() -> DictConfig:
    """verl's ``ppo_trainer`` config with verl's own defaults (unresolved), a fresh copy each call."""
    return copy.deepcopy(_verl_base())


def trains_pairs(cfg: DictConfig) -> bool:
    """Co-rewarding-I trains both views of each question in one step."""
    method = section_of(cfg, MethodConfig)
    return "rephrased" in method.views and method.train_on == "original"


def model_path(cfg: DictConfig) -> str:
    """The base model verl loads: a local folder (the tiny model's build folder) or a Hub id."""
    model = section_of(cfg, BaseModelConfig)
    source = model.path or model.hf_id
    if not source:
        raise ConfigError(f"base_model {model.name!r} has neither path nor hf_id")
    return source


def check_supported(cfg: DictConfig) -> None:
    """Values the verl backend cannot honour, named by key (``schemas.VerlConfig`` holds the section's ranges)."""
    epsilon = section_of(cfg, GrpoConfig).adv_epsilon
    if abs(epsilon - VERL_GRPO_EPSILON) > 1e-12:
        raise ConfigError(f"grpo.adv_epsilon={epsilon}: verl's GRPO uses a fixed {VERL_GRPO_EPSILON}")
    section_of(cfg, VerlConfig)  # engine, trackers, attention, kept saves: the schema's ranges
    teacher = section_of(cfg, MethodConfig).teacher
    problem = teacher_dtype_problem(teacher.dtype) if teacher else None
    if problem:
        raise ConfigError(problem)


def ray_address(cfg: DictConfig, environ: Mapping[str, str] | None = None) -> str | None:
    """The Ray cluster the run joins: ``verl.ray_address`` if set, else (``verl.nnodes > 1`` only) ``$RAY_ADDRESS``.

    ``None`` on one node without ``verl.ray_address``: verl's ``ray.init()`` then does what it always did. Several
    nodes need a cluster started beforehand, so a missing address is an error here rather than a one-node Ray later.
    """
    v = section_of(cfg, VerlConfig)
    configured, nnodes = v.ray_address, v.nnodes
    if not configured and nnodes == 1:
        return None
    address = str(configured or (os.environ if environ is None else environ).get(RAY_ADDRESS_ENV, "")).strip()
    if nnodes > 1 and address in ("", "local"):
        problem = "its address is 'local' (a new one-node Ray)" if address else f"{RAY_ADDRESS_ENV} is unset"
        raise ConfigError(
            f"verl.nnodes={nnodes} joins a running Ray cluster, but {problem}: run `ray start --head` on the first "
            f"node and `ray start --address=HEAD:6379` on the others, then set {RAY_ADDRESS_ENV}=HEAD:6379 "
            "(or verl.ray_address)"
        )
    return address or None


def _data_keys(cfg: DictConfig, run: str, prompts: int) -> dict[str, Any]:
    g, method = section_of(cfg, GrpoConfig), section_of(cfg, MethodConfig)
    return {
        "data.train_files": f"{run}/{VERL_DATA}/train.parquet",
        "data.val_files": f"{run}/{VERL_DATA}/val.parquet",
        "data.train_batch_size": prompts,
        "data.max_prompt_length": int(g.max_prompt_length),
        "data.max_response_length": int(g.max_response_length),
        "data.filter_overlong_prompts": False,  # done before launch, both views of a pair together
        "data.truncation": "error",
        "data.shuffle": True,
        "data.seed": int(cfg.seed if method.data_seed is None else method.data_seed),
    }


def _actor_keys(cfg: DictConfig, prompts: int, attention: Attention) -> dict[str, Any]:
    g, opt, v = section_of(cfg, GrpoConfig), section_of(cfg, OptimizerConfig), section_of(cfg, VerlConfig)
    arr = "actor_rollout_ref"
    return {
        f"{arr}.model.path": model_path(cfg),
        f"{arr}.model.use_remove_padding": attention.packed,
        f"{arr}.model.enable_gradient_checkpointing": True,
        f"{arr}.model.override_config": {"attn_implementation": attention.kernel},  # actor, ref, teacher
        f"{arr}.actor.optim.lr": float(opt.lr),
        f"{arr}.actor.optim.betas": [float(b) for b in opt.betas],
        f"{arr}.actor.optim.weight_decay": float(opt.weight_decay),
        f"{arr}.actor.optim.clip_grad": float(opt.grad_clip),
        f"{arr}.actor.optim.lr_warmup_steps_ratio": float(opt.warmup_ratio),
        f"{arr}.actor.optim.lr_scheduler_type": "cosine",
        f"{arr}.actor.optim.min_lr_ratio": float(opt.min_lr_ratio),
        f"{arr}.actor.optim.num_cycles": float(opt.num_cycles),
        f"{arr}.actor.optim.override_optimizer_config": {"eps": float(opt.eps)},
        f"{arr}.actor.ppo_mini_batch_size": prompts,  # one optimizer step per training step
        f"{arr}.actor.ppo_micro_batch_size_per_gpu": int(g.micro_batch_size),
        f"{arr}.actor.ppo_epochs": 1,
        f"{arr}.actor.use_kl_loss": bool(g.use_kl_loss),
        f"{arr}.actor.kl_loss_coef": float(g.kl_coef),
        f"{arr}.actor.kl_loss_type": str(g.kl_loss_type),
        f"{arr}.actor.entropy_coeff": float(g.entropy_coeff),
        f"{arr}.actor.clip_ratio_low": float(g.clip_ratio_low),
        f"{arr}.actor.clip_ratio_high": float(g.clip_ratio_high),
        f"{arr}.actor.clip_ratio_c": float(g.clip_ratio_c),
        f"{arr}.actor.loss_agg_mode": str(g.loss_agg_mode),
        # the old-log-prob pass computes entropy for every method; unchunked it holds 3 copies of the logits
        # (softmax, softmax * logits): verl's FSDP engine reads this through fsdp_config (docs/gpu-plan.md)
        f"{arr}.actor.entropy_from_logits_with_chunking": True,
        # FSDP2 on every cell: the flavour the CPU end-to-end run exercises (FSDP1 cannot run on CPU: FSDP(device_id=0),
        # verl/workers/engine/fsdp/transformer_impl.py ~437); the reference/teacher follows the actor's strategy.
        f"{arr}.actor.strategy": "fsdp2",
        f"{arr}.actor.fsdp_config.strategy": "fsdp2",
        f"{arr}.ref.fsdp_config.strategy": "fsdp2",
        f"{arr}.actor.fsdp_config.param_offload": bool(v.actor_param_offload),
        f"{arr}.actor.fsdp_config.optimizer_offload": bool(v.actor_param_offload),
    }


def _rollout_ref_keys(cfg: DictConfig) -> dict[str, Any]:
    g, v, arr = section_of(cfg, GrpoConfig), section_of(cfg, VerlConfig), "actor_rollout_ref"
    return {
        f"{arr}.rollout.name": str(v.rollout_engine),
        f"{arr}.rollout.n": int(g.n),
        f"{arr}.rollout.temperature": float(g.temperature),
        f"{arr}.rollout.top_p": float(g.top_p),
        f"{arr}.rollout.top_k": int(g.top_k),
        f"{arr}.rollout.do_sample": True,
        f"{arr}.rollout.tensor_model_parallel_size": int(v.tensor_parallel_size),
        f"{arr}.rollout.gpu_memory_utilization": float(v.gpu_memory_utilization),
        f"{arr}.rollout.log_prob_micro_batch_size_per_gpu": int(g.log_prob_micro_batch_size),
        f"{arr}.rollout.val_kwargs.temperature": 0,
        f"{arr}.rollout.val_kwargs.n": 1,
        f"{arr}.rollout.val_kwargs.do_sample": False,
        f"{arr}.rollout.checkpoint_engine.backend": "naive",
        f"{arr}.ref.log_prob_micro_batch_size_per_gpu": int(g.log_prob_micro_batch_size),
        f"{arr}.ref.fsdp_config.param_offload": bool(v.ref_param_offload),
    }


def _trainer_keys(cfg: DictConfig, run: str) -> dict[str, Any]:
    g, sched, v = section_of(cfg, GrpoConfig), section_of(cfg, ScheduleConfig), section_of(cfg, VerlConfig)
    algo = "algorithm"
    return {
        f"{algo}.adv_estimator": "grpo",
        f"{algo}.norm_adv_by_std_in_grpo": bool(g.norm_adv_by_std),
        f"{algo}.use_kl_in_reward": False,
        "critic.enable": False,
        "reward.reward_manager.source": "register",
        "reward.reward_manager.name": GT_LOOP_MANAGER,
        "trainer.project_name": "corewarding",
        "trainer.experiment_name": cell_of(cfg).cell_id,
        "trainer.logger": [str(x) for x in v.logger],
        "trainer.nnodes": int(v.nnodes),
        "trainer.n_gpus_per_node": int(v.n_gpus_per_node),
        "trainer.total_epochs": int(sched.epochs),
        "trainer.total_training_steps": None if sched.total_steps is None else int(sched.total_steps),
        "trainer.save_freq": int(sched.save_freq),
        "trainer.test_freq": int(sched.test_freq),
        "trainer.val_before_train": bool(sched.val_before_train),
        "trainer.default_local_dir": f"{run}/{CHECKPOINTS}",
        "trainer.max_actor_ckpt_to_keep": None if v.checkpoints_to_keep is None else int(v.checkpoints_to_keep),
        "trainer.resume_mode": "auto",
        "trainer.balance_batch": True,  # the trainer's reward hook runs inside _balance_batch
        "trainer.use_v1": False,  # the plug-ins drive verl's RayPPOTrainer (see trainer.py)
        "trainer.device": "cuda",
        ENV_VARS: {"VERL_USE_EXTERNAL_MODULES": PLUGIN_MODULE},
    }


def translate(
    cfg: DictConfig, run_dir: str | Path, environ: Mapping[str, str] | None = None, flash_attn: bool | None = None
) -> dict[str, Any]:
    """Our config as verl keys (dotted) and values, before verl's defaults and ``verl.overrides``.

    ``environ`` (default ``os.environ``) is read for ``RAY_ADDRESS`` when the run spans several nodes; ``flash_attn``
    (default: try the import here) decides ``verl.attn_implementation=auto`` (``attention.choose_attention``).
    """
    check_supported(cfg)
    verl = section_of(cfg, VerlConfig)
    prompts = section_of(cfg, GrpoConfig).train_batch_size * (2 if trains_pairs(cfg) else 1)
    run = str(run_dir)
    out = {
        **_data_keys(cfg, run, prompts),
        **_actor_keys(cfg, prompts, choose_attention(verl, flash_attn)),
        **_rollout_ref_keys(cfg),
        **_trainer_keys(cfg, run),
    }
    address = ray_address(cfg, environ)
    if address is not None:  # verl passes ray_kwargs.ray_init to ray.init(): address= joins the cluster
        out["ray_kwargs.ray_init.address"] = address
    out.update(_corewarding_worker_keys(cfg))
    if verl.platform == "cpu":
        out.update(_cpu_keys(cfg, out[ENV_VARS]))
    return out


def _cpu_keys(cfg: DictConfig, env_vars: Mapping[str, str]) -> dict[str, Any]:
    """``verl.platform=cpu``: verl's own trainer, vLLM's CPU engine and FSDP2 on gloo on the host (``make verl-e2e``;
    the platform and its fixes: ``cpu_platform.py``). Only device plumbing changes, never the algorithm's values."""
    from corewarding.training.verl.cpu_platform import CPU_ENV  # verl: imported when used

    arr, g, v = "actor_rollout_ref", section_of(cfg, GrpoConfig), section_of(cfg, VerlConfig)
    ray: dict[str, Any] = {}
    if not v.ray_address:  # a Ray of its own; joining a running one (make verl-e2e's), it brings its own
        ray = {
            # single_controller/ray/base.py ~146: placement counts GPUs only, so Ray gets one logical GPU per rank
            "ray_kwargs.ray_init.num_gpus": int(v.nnodes) * int(v.n_gpus_per_node),
            "ray_kwargs.ray_init.num_cpus": 16,
            "ray_kwargs.ray_init._node_ip_address": "127.0.0.1",  # Ray, vLLM's servers and gloo stay on loopback
            "ray_kwargs.ray_init.include_dashboard": False,
        }
    return {
        **ray,
        "trainer.device": "cpu",
        "data.dataloader_num_workers": 0,  # 8 loader processes by default: start-up time on a 2-core host
        # experimental/reward_loop/reward_loop.py ~326: 8 RewardLoopWorker actors by default, each a process that
        # imports verl and torch (~7 s of CPU and ~0.8 GB apiece); one scores the tiny batches as fast
        "reward.num_workers": 1,
        ENV_VARS: {**env_vars, **CPU_ENV},  # the plug-in's module, then the platform's environment
        # the model keys stay the config's (_actor_keys): gradient checkpointing and the kernel and packing of
        # attention.choose_attention (make verl-e2e asks for packed sdpa, verl's packed branch the GPU kernels take)
        f"{arr}.actor.use_torch_compile": False,
        f"{arr}.actor.fsdp_config.use_torch_compile": False,
        f"{arr}.ref.fsdp_config.use_torch_compile": False,
        f"{arr}.rollout.dtype": "float32",
        f"{arr}.rollout.enforce_eager": True,
        f"{arr}.rollout.free_cache_engine": False,  # vLLM's sleep mode is GPU-only
        f"{arr}.rollout.enable_sleep_mode": False,
        f"{arr}.rollout.max_model_len": int(g.max_prompt_length) + int(g.max_response_length),
        f"{arr}.rollout.agent.num_workers": 1,
        # the bucket must hold the largest tensor: 151,936 x 128 fp32 embeddings are 74 MiB (tiny-qwen3-vocab)
        f"{arr}.rollout.checkpoint_engine.update_weights_bucket_megabytes": 256,
    }


def reference_dtype(cfg: DictConfig) -> str:
    """verl's dtype of the reference model: the teacher's own, else bf16 (a frozen reference only gives the KL anchor;
    verl's fp32 default doubles its pinned host memory)."""
    teacher = section_of(cfg, MethodConfig).teacher
    return TORCH_TO_VERL_DTYPE[teacher.dtype] if teacher else "bf16"


def _corewarding_worker_keys(cfg: DictConfig) -> dict[str, Any]:
    """What our worker reads beside verl's keys, and the reference's dtype."""
    arr, v = "actor_rollout_ref", section_of(cfg, VerlConfig)
    return {
        # the worker saves/loads the teacher's shards
        f"{arr}.corewarding_teacher": section_of(cfg, MethodConfig).teacher is not None,
        f"{arr}.corewarding_view_sum_loss": trains_pairs(cfg) and v.view_sum_loss,
        # the chunk of every chunked statistic the probe computes (the key's name predates the statistics registry)
        f"{arr}.corewarding_self_certainty_chunk_tokens": v.self_certainty_chunk_tokens,
        f"{arr}.ref.fsdp_config.model_dtype": reference_dtype(cfg),
    }


def corewarding_section(cfg: DictConfig, run_dir: str | Path) -> dict[str, Any]:
    """What the plug-ins read at run time: the method, the vote, the files the run writes."""
    from corewarding.training.verl.rewards import (
        manager_name,  # verl: imported when used
    )

    run = str(run_dir)
    return {
        "cell_id": cell_of(cfg).cell_id,
        "method": OmegaConf.to_container(cfg.method, resolve=True),
        "reward_manager": manager_name(section_of(cfg, MethodConfig).reward),
        "pairs": trains_pairs(cfg),
        "vote": OmegaConf.to_container(cfg.vote, resolve=True),
        "run_dir": run,
        "metrics_file": str(metrics_file(Path(run_dir))),
        "verl_log_dir": f"{run}/{VERL_LOGS}",
        "reward_dump": section_of(cfg, VerlConfig).reward_dump,
    }


def _exists(cfg: DictConfig, key: str) -> bool:
    parent, _, leaf = key.rpartition(".")
    node = OmegaConf.select(cfg, parent) if parent else cfg  # raw read: verl's own tree, by the key being set
    return isinstance(node, DictConfig) and leaf in node.keys()  # noqa: SIM118  (`in` is False for ??? values)


def apply(cfg: DictConfig, values: Mapping[str, Any], allow_new: bool = False) -> None:
    """Set dotted keys on verl's config; a key verl lacks is a ConfigError unless it is ours to add."""
    for key, value in values.items():
        new_ok = allow_new or any(key == k or key.startswith(k + ".") for k in NEW_KEYS)
        if not new_ok and not _exists(cfg, key):
            raise ConfigError(f"verl config has no key {key!r} (verl version mismatch or a typo)")
        with open_dict(cfg):
            OmegaConf.update(cfg, key, value, merge=False, force_add=True)


def parse_override(text: str) -> tuple[str, Any, bool]:
    """``key=value`` (or ``+key=value`` to add a key) with a YAML value."""
    if "=" not in text:
        raise ConfigError(f"verl.overrides entry {text!r}: expected key=value")
    key, _, raw = text.partition("=")
    add = key.startswith("+")
    return key.lstrip("+").strip(), yaml.safe_load(raw) if raw.strip() else None, add


def to_verl_config(
    cfg: DictConfig, run_dir: str | Path, environ: Mapping[str, str] | None = None, flash_attn: bool | None = None
) -> DictConfig:
    """The resolved verl config of ``cfg`` for a run writing under ``run_dir`` (``environ``, ``flash_attn``: see
    ``translate``)."""
    verl_cfg = verl_base_config()
    apply(verl_cfg, translate(cfg, run_dir, environ, flash_attn))
    apply(verl_cfg, {"corewarding": corewarding_section(cfg, run_dir)})
    for text in section_of(cfg, VerlConfig).overrides:
        key, value, add = parse_override(str(text))
        apply(verl_cfg, {key: value}, allow_new=add)
    OmegaConf.resolve(verl_cfg)
    init = verl_cfg.ray_kwargs.ray_init
    if init.get("address") and init.num_cpus is not None:
        raise ConfigError(
            f"ray_kwargs.ray_init.num_cpus={init.num_cpus}: Ray refuses it when joining the cluster at {init.address}"
        )
    return verl_cfg


def verl_yaml(verl_cfg: DictConfig) -> str:
    """The YAML text of a resolved verl config (stable key order: verl's own)."""
    return OmegaConf.to_yaml(verl_cfg)


def plugin_env() -> dict[str, str]:
    """The environment that makes verl import the plug-ins in processes it starts (entry point fallback)."""
    modules = [m for m in os.environ.get("VERL_USE_EXTERNAL_MODULES", "").split(",") if m]
    return {"VERL_USE_EXTERNAL_MODULES": ",".join(dict.fromkeys([*modules, PLUGIN_MODULE]))}
