"""Every name inside a run folder ``runs/<cell_id>/``, and the small functions that resolve or list them.

No other module spells a run-folder path: the trainers write these names, evaluation, ingest, publishing and the
shared store read them. The layout::

    config.yaml            the resolved training config          run.json       the run record (status, hashes)
    metrics.jsonl          one line per training step            .trainer.lock  held while a trainer runs
    inputs.json            the rows kept and dropped              verl_config.yaml, config_hash  verl: what it ran
    verl_data/, verl_logs/ verl: the rows it reads, its raw logs
    checkpoints/           global_step_N/ per save, holding model/ (local) or actor/ (verl); ``latest`` (local:
                           ``global_step_N``) or ``latest_checkpointed_iteration.txt`` (verl: ``N``) names the newest
                           complete one; ``saved_checkpoints`` lists the complete ones of both backends
    hf/global_step_N/      a verl step merged into a transformers folder
    eval/                  metrics.parquet, samples.parquet, index.json, pipeline.json, units/ (one folder per unit)
    publish/global_step_N/ the Hub folder of a step; its .pushed.json records each push
    released/              the audit of the cell's released Hub checkpoint: audit.json (repo, revision, status)
                           and eval/ laid out as a run's (``corewarding audit``)
"""

from __future__ import annotations

import re
from pathlib import Path

CONFIG = "config.yaml"
RUN_RECORD = "run.json"
METRICS = "metrics.jsonl"
LOCK = ".trainer.lock"
VERL_INPUTS = "inputs.json"  # both backends: the rows kept and dropped before training
VERL_CONFIG = "verl_config.yaml"
VERL_DATA = "verl_data"  # verl: the filtered training and validation rows it reads
VERL_LOGS = "verl_logs"  # verl: its raw metric logs, exported to metrics.jsonl
VERL_REWARDS = "verl_rewards"  # verl with verl.reward_dump: what the reward manager scored, one JSONL per step
VERL_CONFIG_HASH = "config_hash"  # verl: the training-config hash its checkpoints were made under

CHECKPOINTS = "checkpoints"
STEP_PREFIX = "global_step_"
STEP_DIR = re.compile(r"^global_step_(\d+)$")
LATEST = "latest"  # the local backend's pointer: the text global_step_N
VERL_TRACKER = "latest_checkpointed_iteration.txt"  # verl's record of its newest complete save: the text N
LOCAL_MODEL = "model"  # local: global_step_N/model/, a transformers folder; its config.json marks it saved
VERL_ACTOR = "actor"  # verl: global_step_N/actor/, FSDP shards; fsdp_config.json, written last, marks it complete
VERL_TEACHER = "teacher"  # global_step_N/teacher/rank_R.pt: the Co-rewarding-II/III teacher's shards, beside actor/


def verl_shard_name(kind: str, rank: int, world_size: int) -> str:
    """One rank's ``model`` / ``optim`` / ``extra_state`` file in ``global_step_N/actor``, as verl's FSDP checkpoint
    manager names it (by the global rank and world size of ``torch.distributed``)."""
    return f"{kind}_world_size_{world_size}_rank_{rank}.pt"


HF_CONFIG = "config.json"
VERL_DONE = "fsdp_config.json"
MERGED = "hf"

EVAL = "eval"
EVAL_METRICS = Path(EVAL) / "metrics.parquet"
EVAL_SAMPLES = Path(EVAL) / "samples.parquet"
EVAL_INDEX = Path(EVAL) / "index.json"
EVAL_UNITS = Path(EVAL) / "units"
EVAL_STAMP = "pipeline.json"  # under eval/: which steps the pipeline evaluated with which benchmark settings

RELEASED = "released"
AUDIT_RECORD = "audit.json"  # under released/: which Hub checkpoint was audited, at which revision, how it ended
AUDIT_FAILURE = "last_failure.json"  # under released/: a re-audit that failed beside a finished audit it kept

PUBLISH = "publish"
PUSH_RECORD = ".pushed.json"  # in a publish folder: each successful push (repo, revision, commit)


def step_name(step: int) -> str:
    """``global_step_<step>``: a checkpoint's folder, a merged folder, a publish folder and a Hub branch.

    >>> step_name(12)
    'global_step_12'
    """
    return f"{STEP_PREFIX}{step}"


def step_of(name: str) -> int | None:
    """The step a ``global_step_N`` name holds; None for any other name.

    >>> step_of("global_step_40"), step_of(".tmp_global_step_40"), step_of("latest")
    (40, None, None)
    """
    match = STEP_DIR.match(name)
    return int(match.group(1)) if match else None


def checkpoints_dir(run_dir: Path) -> Path:
    return Path(run_dir) / CHECKPOINTS


def step_dir(checkpoints: Path, step: int) -> Path:
    """A step's folder under a checkpoints folder."""
    return Path(checkpoints) / step_name(step)


def step_dirs(checkpoints: Path) -> dict[int, Path]:
    """Every ``global_step_N`` folder under ``checkpoints`` by step, oldest first (hidden temporary folders are not
    steps); empty when the folder does not exist."""
    checkpoints = Path(checkpoints)
    if not checkpoints.is_dir():
        return {}
    found = {step: p for p in checkpoints.iterdir() if p.is_dir() and (step := step_of(p.name)) is not None}
    return dict(sorted(found.items()))


def verl_steps(checkpoints: Path) -> list[int]:
    """The steps with a complete verl actor checkpoint (``global_step_N/actor/fsdp_config.json``), ascending."""
    return [step for step, folder in step_dirs(checkpoints).items() if (folder / VERL_ACTOR / VERL_DONE).is_file()]


def saved_checkpoints(checkpoints: Path) -> dict[int, Path]:
    """Every complete checkpoint by step, ascending, either backend's: the local ``global_step_N/model`` (a
    transformers folder) or verl's ``global_step_N/actor`` (FSDP shards); a step with both is the local one."""
    found = {}
    for step, folder in step_dirs(checkpoints).items():
        if (folder / LOCAL_MODEL / HF_CONFIG).is_file():
            found[step] = folder / LOCAL_MODEL
        elif (folder / VERL_ACTOR / VERL_DONE).is_file():
            found[step] = folder / VERL_ACTOR
    return found


def config_file(run_dir: Path) -> Path:
    return Path(run_dir) / CONFIG


def record_file(run_dir: Path) -> Path:
    return Path(run_dir) / RUN_RECORD


def metrics_file(run_dir: Path) -> Path:
    return Path(run_dir) / METRICS


def reward_dump_file(run_dir: Path, step: int) -> Path:
    """``verl_rewards/step_000N.jsonl``: the rows a verl step's reward manager scored (``verl.reward_dump``)."""
    return Path(run_dir) / VERL_REWARDS / f"step_{step:04d}.jsonl"


def eval_dir(run_dir: Path) -> Path:
    return Path(run_dir) / EVAL


def merged_dir(run_dir: Path, step: int) -> Path:
    """Where a verl step is merged into a transformers folder."""
    return Path(run_dir) / MERGED / step_name(step)


def publish_dir(run_dir: Path, step: int) -> Path:
    """The default Hub folder of a step."""
    return Path(run_dir) / PUBLISH / step_name(step)


def released_dir(run_dir: Path) -> Path:
    """Where the audit of the cell's released checkpoint lives (its eval/ is laid out as a run's)."""
    return Path(run_dir) / RELEASED
