"""``corewarding train ... backend=verl``: translate, validate (``--dry-run`` stops here, CPU only), prepare the
inputs, and start verl's trainer with the plug-ins (``run_ppo(config, task_runner_class=CorewardingTaskRunner)``).
"""

from __future__ import annotations

import copy
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from corewarding import matrix
from corewarding.config import ConfigError
from corewarding.extras import require_backend
from corewarding.run_folder import (
    VERL_CONFIG,
    VERL_CONFIG_HASH,
    VERL_DATA,
    VERL_INPUTS,
    VERL_TRACKER,
    checkpoints_dir,
    config_file,
)
from corewarding.schemas import BaseModelConfig, DatasetConfig, PathsConfig, VerlConfig, section_of
from corewarding.training import run_record
from corewarding.training.common import accepted_config_hashes, cell_of, total_steps, training_config_hash
from corewarding.training.verl import resume
from corewarding.training.verl.attention import Attention, choose_attention
from corewarding.training.verl.metrics import export_metrics
from corewarding.training.verl.verl_config import to_verl_config, trains_pairs, verl_yaml

log = logging.getLogger(__name__)


@dataclass
class VerlLaunch:
    """A validated verl run: where it writes, its resolved verl config, what was checked."""

    run_dir: Path
    verl_config: DictConfig
    attention: Attention
    checks: list[str] = field(default_factory=list)


def check_verl_config(verl_cfg: DictConfig) -> list[str]:
    """verl's own config validation and the plug-in lookups, as the trainer will do them (all CPU-safe)."""
    from verl.trainer.ppo.core_algos import get_adv_estimator_fn  # verl: imported when used
    from verl.trainer.ppo.reward import resolve_reward_manager_cls  # verl: imported when used
    from verl.trainer.ppo.utils import (  # verl: imported when used
        need_critic,
        need_reference_policy,
    )
    from verl.utils.config import (  # verl: imported when used
        omega_conf_to_dataclass,
        validate_config,
    )
    from verl.workers.reward_manager import get_reward_manager_cls  # verl: imported when used

    cfg = copy.deepcopy(verl_cfg)  # verl's validation writes derived values into the config
    try:
        validate_config(cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
        checks = ["verl validate_config"]
        for key in ("actor_rollout_ref.rollout", "algorithm"):
            omega_conf_to_dataclass(OmegaConf.select(cfg, key))  # raw read: verl's own sections, by name
            checks.append(f"{key} builds its verl dataclass")
    except (AssertionError, ValueError, TypeError) as exc:  # verl reports config errors with asserts
        raise ConfigError(f"verl rejects the translated config: {exc}") from exc
    checks.append(f"reward loop manager {resolve_reward_manager_cls(cfg).__name__}")
    checks.append(f"batch reward manager {get_reward_manager_cls(str(cfg.corewarding.reward_manager)).__name__}")
    checks.append(f"advantage estimator {get_adv_estimator_fn(str(cfg.algorithm.adv_estimator)).__name__}")
    return checks


def prepare(cfg: DictConfig, verl_cfg: DictConfig, run_dir: Path) -> dict[str, object]:
    """Filter and write the run's verl inputs (as the local backend filters), ``inputs.json`` and the configs."""
    from corewarding.lm.loading import (  # torch: imported when used
        base_model_source,
        load_tokenizer,
    )
    from corewarding.training.inputs import load_training_rows  # transformers: imported when used
    from corewarding.training.verl.data import (
        write_verl_inputs,  # torch: imported when used
    )

    config_hash = training_config_hash(cfg)
    hash_file = run_dir / VERL_CONFIG_HASH
    has_checkpoints = (checkpoints_dir(run_dir) / VERL_TRACKER).is_file()
    if has_checkpoints and hash_file.is_file() and hash_file.read_text().strip() not in accepted_config_hashes(cfg):
        raise ConfigError(
            f"{run_dir} holds checkpoints of another configuration (its config.yaml); "
            "resume with the same overrides, or train into a new paths.runs_dir / --run-dir"
        )
    rows = load_training_rows(cfg, load_tokenizer(base_model_source(cfg)))
    write_verl_inputs(rows, run_dir / VERL_DATA, trains_pairs(cfg))
    report: dict[str, object] = {
        "train_rows": len(rows.train),
        "rephrased_rows": None if rows.rephrased is None else len(rows.rephrased),
        "val_rows": len(rows.val),
        "dropped": rows.dropped,
        "prompt_filter": rows.prompt_filter,
        "total_steps": total_steps(cfg, len(rows.train)),
    }
    (run_dir / VERL_INPUTS).write_text(json.dumps(report, indent=2) + "\n")
    config_file(run_dir).write_text(OmegaConf.to_yaml(cfg))
    (run_dir / VERL_CONFIG).write_text(verl_yaml(verl_cfg))
    hash_file.write_text(config_hash + "\n")
    return report


def resume_point(verl_cfg: DictConfig, run_dir: Path) -> resume.ResumePoint | None:
    """Point verl at the newest complete, valid save (``resume.apply``), or stop in one line when the run folder
    holds saves and none is usable."""
    trainer = verl_cfg.trainer
    world_size = int(trainer.nnodes) * int(trainer.n_gpus_per_node)
    teacher = bool(verl_cfg.actor_rollout_ref.get("corewarding_teacher", False))  # raw read: older runs lack it
    return resume.apply(trainer, checkpoints_dir(run_dir), world_size, teacher)


def with_absolute_model_path(cfg: DictConfig) -> DictConfig:
    """A copy of ``cfg`` whose local base-model folder is absolute (Ray workers do not share the driver's cwd)."""
    out = copy.deepcopy(cfg)
    if out.base_model.path and not Path(out.base_model.path).is_absolute():
        out.base_model.path = str(Path(out.base_model.path).resolve())
    return out


def launch(cfg: DictConfig, run_dir: Path | None = None) -> VerlLaunch:
    """The validated verl run of ``cfg``, its paths absolute."""
    target = Path(run_dir or matrix.run_dir(cell_of(cfg), section_of(cfg, PathsConfig).runs_dir)).resolve()
    attention = choose_attention(section_of(cfg, VerlConfig))  # auto: whether flash-attn imports on this machine
    verl_cfg = to_verl_config(with_absolute_model_path(cfg), target)  # the same choice (flash_attn_imports is cached)
    return VerlLaunch(target, verl_cfg, attention, check_verl_config(verl_cfg))


def train_verl(cfg: DictConfig, run_dir: Path | None = None, dry_run: bool = False) -> VerlLaunch:
    """Validate and (unless ``dry_run``) train ``cfg``'s cell with verl: on this node's GPUs, or with
    ``verl.nnodes > 1`` on those of the running Ray cluster it joins (see ``verl_config.ray_address``)."""
    run = launch(cfg, run_dir)
    if dry_run:
        return run
    if section_of(cfg, VerlConfig).platform == "cpu":  # make verl-e2e: vLLM's CPU build, the CPU platform in each
        require_backend("verl.platform=cpu", modules=("vllm",), hint="make verl-e2e installs it in .venv-verl")
        from corewarding.training.verl.cpu_platform import (  # verl: imported when used
            activate,
        )

        activate()
    else:
        require_backend("backend=verl", gpu=True, does="trains", hint="--dry-run validates on CPU")
    log.info("attention: %s (%s)", run.attention.name, run.attention.why)
    if run.attention.kernel == "flash_attention_2":  # verl would fail later, in every worker's start-up
        require_backend(
            "verl.attn_implementation=flash_attention_2", modules=("flash_attn",),
            hint="pip install -e '.[gpu-flash]' (it builds against your CUDA toolkit) or verl.attn_implementation=auto",
        )  # fmt: skip
    from verl.trainer.main_ppo import run_ppo  # verl: imported when used

    from corewarding.training.verl.runner import (
        CorewardingTaskRunner,  # verl: imported when used
    )

    run.run_dir.mkdir(parents=True, exist_ok=True)
    if section_of(cfg, BaseModelConfig).builder == "tiny" or section_of(cfg, DatasetConfig).name == "tiny":
        log.info("building the tiny model/data under %s", section_of(cfg, PathsConfig).artifacts_dir)
    prepare(cfg, run.verl_config, run.run_dir)
    resume_point(run.verl_config, run.run_dir)
    run_record.record_start(run.run_dir, cfg, training_config_hash(cfg), cell_of(cfg).cell_id)
    trainer = run.verl_config.trainer
    where = run.verl_config.ray_kwargs.ray_init.get("address") or "ray.init()'s default address"
    log.info("training on %d node(s) x %d GPUs through %s", trainer.nnodes, trainer.n_gpus_per_node, where)
    try:
        run_ppo(run.verl_config, task_runner_class=CorewardingTaskRunner)
    except KeyboardInterrupt:
        run_record.record_end(run.run_dir, "interrupted")
        raise
    except BaseException as exc:
        run_record.record_end(run.run_dir, "failed", exc)
        raise
    finally:
        export_metrics(run.verl_config.corewarding.verl_log_dir, run.verl_config.corewarding.metrics_file)
    run_record.record_end(run.run_dir, "finished")
    return run
