"""Typed schemas of the config sections: the training config's (``configs/config.yaml``: grpo, optimizer, schedule,
vote, verl, and a method's EMA teacher), the pipeline's cell runs, shared store and alerts (``configs/pipeline.yaml``)
and the evaluation's checker and intervals (``configs/eval.yaml``); each field carries its type, its range and a
one-line doc.

``typed(Schema, cfg.section, "section")`` reads a composed section into a frozen dataclass, or raises ConfigError
with one line naming the key (``optimizer.lr=inf: must be finite and > 0``); a key the schema does not know is an
error too (a typo such as ``grpo.kl_cof`` is never silently ignored). Modules take the typed object, not the whole
config. Bottom floor: nothing of the package is imported here.
"""

from __future__ import annotations

import math
import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, fields, is_dataclass
from functools import cache
from typing import Any, TypeVar

from omegaconf import Container, DictConfig, OmegaConf

from corewarding.errors import ExpectedError

T = TypeVar("T")


class ConfigError(ExpectedError, ValueError):
    """A config value that cannot work; the message names the key."""


_KEY = re.compile(r"[A-Za-z0-9_.@/\[\]-]{1,200}")


def without_values(message: str) -> str:
    """A ConfigError's message with only its key and its rule (``optimizer.lr: must be finite and > 0``): what a
    work pool's job run may say, since a value may have been read from the machine's environment."""
    found = _KEY.match(message)
    key = found.group(0) if found else "a config key"
    rule = message.rsplit(": must be ", 1)[1].split(", got ", 1)[0] if ": must be " in message else None
    return f"{key}: must be {rule}" if rule else f"{key}: not valid (the value is not shown for a job run)"


@dataclass(frozen=True)
class Rule:
    """What a value must be: a predicate and the words for it (``finite and > 0``)."""

    ok: Callable[[Any], bool]
    requirement: str


def setting(doc: str, rule: Rule | None = None, *, default: Any = MISSING) -> Any:
    """A schema field: its one-line doc and its range (the type comes from the annotation); with ``default`` the key
    may be left out of the YAML (a schema with such fields is ``kw_only``)."""
    metadata = {"doc": doc, "rule": rule}
    if isinstance(default, dict | list):
        return field(default_factory=lambda: type(default)(default), metadata=metadata)
    return field(default=default, metadata=metadata)


AT_LEAST_1 = Rule(lambda v: v >= 1, "a whole number >= 1")
POSITIVE = Rule(lambda v: v > 0, "finite and > 0")
NON_NEGATIVE = Rule(lambda v: v >= 0, "finite and >= 0")
AT_LEAST_1_OR_NULL = Rule(lambda v: v >= 1, "a whole number >= 1, or null")
GIGABYTES_OR_NULL = Rule(lambda v: v > 0, "a number > 0 or null (this machine's)")
UNIT_INTERVAL = Rule(lambda v: 0 <= v <= 1, "in [0, 1]")
BETAS = Rule(lambda v: len(v) == 2 and all(0 <= b < 1 for b in v), "two numbers, each in [0, 1)")


def one_of(*choices: str, why: str = "") -> Rule:
    return Rule(lambda v: v in choices, why or f"one of {', '.join(choices)}")


@dataclass(frozen=True)
class GrpoConfig:
    """``grpo``: the GRPO setup every method shares (methods.md section 1.0)."""

    train_batch_size: int = setting("prompts per step (pairs for Co-rewarding-I)", AT_LEAST_1)
    n: int = setting("rollouts per prompt (G)", AT_LEAST_1)
    temperature: float = setting("rollout sampling temperature", Rule(lambda v: v > 0, "> 0"))
    top_p: float = setting("rollout nucleus sampling", Rule(lambda v: 0 < v <= 1, "in (0, 1]"))
    top_k: int = setting("rollout top-k (-1: off)")
    max_prompt_length: int = setting("prompt tokens kept (longer prompts are dropped at load)", AT_LEAST_1)
    max_response_length: int = setting("response tokens generated at most", AT_LEAST_1)
    filter_overlong_prompts: bool = setting("drop prompts over max_prompt_length at load")
    micro_batch_size: int = setting("sequences per forward/backward (gradients accumulate)", AT_LEAST_1)
    log_prob_micro_batch_size: int = setting("sequences per no-grad log-prob forward", AT_LEAST_1)
    clip_ratio_low: float = setting("PPO clip below 1", Rule(lambda v: 0 <= v < 1, "in [0, 1)"))
    clip_ratio_high: float = setting("PPO clip above 1", Rule(lambda v: v >= 0, ">= 0"))
    clip_ratio_c: float = setting("dual clip for negative advantages", Rule(lambda v: v > 1, "> 1"))
    loss_agg_mode: str = setting(
        "how token losses aggregate", one_of("token-mean", why="token-mean (the only mode of the local backend)")
    )
    entropy_coeff: float = setting(
        "entropy bonus", Rule(lambda v: v == 0, "0 (the paper uses no entropy bonus; the local backend has none)")
    )
    use_kl_loss: bool = setting("a KL penalty to the reference (or the teacher) in the loss")
    kl_loss_type: str = setting(
        "the KL estimator", one_of("low_var_kl", why="low_var_kl (the only estimator of the local backend)")
    )
    kl_coef: float = setting("weight of the KL penalty", Rule(lambda v: v >= 0, ">= 0"))
    norm_adv_by_std: bool = setting("divide group advantages by their standard deviation")
    adv_epsilon: float = setting("added to the standard deviation", NON_NEGATIVE)


@dataclass(frozen=True)
class OptimizerConfig:
    """``optimizer``: AdamW with linear warmup, then cosine decay."""

    lr: float = setting("peak learning rate", POSITIVE)
    betas: tuple[float, float] = setting("AdamW betas", BETAS)
    eps: float = setting("AdamW epsilon", POSITIVE)
    weight_decay: float = setting("AdamW decoupled weight decay", NON_NEGATIVE)
    grad_clip: float = setting("largest global gradient norm", POSITIVE)
    warmup_ratio: float = setting("linear warmup over floor(ratio x total steps) steps", UNIT_INTERVAL)
    min_lr_ratio: float = setting("the cosine's floor, as a fraction of lr", UNIT_INTERVAL)
    num_cycles: float = setting("cosine cycles after warmup (0.5: one half cycle down to the floor)", NON_NEGATIVE)


@dataclass(frozen=True)
class ScheduleConfig:
    """``schedule``: how long a run trains, and when it saves and validates."""

    epochs: int = setting("passes over the training set", AT_LEAST_1)
    total_steps: int | None = setting("steps (null: floor(rows / train_batch_size) x epochs)", AT_LEAST_1_OR_NULL)
    save_freq: int = setting("save a checkpoint every this many steps", AT_LEAST_1)
    test_freq: int = setting("validate every this many steps", AT_LEAST_1)
    val_before_train: bool = setting("validate the base model at step 0")
    val_max_samples: int | None = setting("validation problems used (null: all)", AT_LEAST_1_OR_NULL)


@dataclass(frozen=True)
class VoteConfig:
    """``vote``: how answers are compared when votes are counted."""

    canonicalize: str = setting("answer comparison", one_of("exact", "normalized", "math_verify"))
    math_verify_timeout_s: float = setting("seconds per math-verify comparison", Rule(lambda v: v > 0, "> 0"))
    math_verify_workers: int | None = setting(
        "math-verify processes (null: one per core)", Rule(lambda v: v >= 1, "an integer >= 1, or null (one per core)")
    )


@dataclass(frozen=True)
class VerlConfig:
    """``verl``: the cluster shape and engine settings of the GPU backend (backend=verl)."""

    nnodes: int = setting("nodes (> 1 joins the Ray cluster at ray_address)", Rule(lambda v: v >= 1, ">= 1"))
    n_gpus_per_node: int = setting("GPUs per node", Rule(lambda v: v >= 1, ">= 1"))
    platform: str = setting(
        "where verl runs", one_of("cuda", "cpu", why="cuda, or cpu (verl's CPU end-to-end run, make verl-e2e)")
    )
    ray_address: str | None = setting("HEAD:6379 of a running Ray cluster (null: $RAY_ADDRESS)")
    rollout_engine: str = setting("verl's rollout engine", one_of("vllm", "sglang", why="vllm or sglang"))
    tensor_parallel_size: int = setting("GPUs per vLLM engine", AT_LEAST_1)
    gpu_memory_utilization: float = setting("vLLM's share of a GPU's memory", Rule(lambda v: 0 < v <= 1, "in (0, 1]"))
    ref_param_offload: bool = setting("keep the reference (or teacher) on the CPU between uses")
    actor_param_offload: bool = setting("keep the policy on the CPU between uses")
    attn_implementation: str = setting(
        "attention kernel (auto: flash_attention_2 where flash-attn imports, else sdpa)",
        one_of("auto", "flash_attention_2", "flex_attention", "sdpa", "eager"),
    )
    remove_padding: str | bool = setting(
        "pack each micro-batch into one row (auto: only for flash_attention_2 and flex_attention)",
        Rule(lambda v: v in ("auto", True, False), "auto, true or false"),
    )
    view_sum_loss: bool = setting("Co-rewarding-I: sum the two views' token means (the reference's loss)")
    self_certainty_chunk_tokens: int = setting(
        "positions whose logits are upcast at once", Rule(lambda v: v >= 0, "a whole number >= 0 (0: all at once)")
    )
    checkpoints_to_keep: int | None = setting(
        "newest saves kept", Rule(lambda v: v >= 1, "a whole number >= 1, or null to keep every save")
    )
    reward_dump: bool = setting("write every scored row to verl_rewards/step_N.jsonl")
    logger: tuple[str, ...] = setting(
        "verl's trackers",
        Rule(lambda v: "file" in v, "a list of trackers; it must include file (it feeds metrics.jsonl)"),
    )
    overrides: tuple[str, ...] = setting("raw verl overrides applied last")
    gpu_memory_gb: float = setting("memory per GPU the dry run plans for", Rule(lambda v: v > 0, "a number > 0"))
    host_memory_gb: float | None = setting("memory per node (null: this machine's)", GIGABYTES_OR_NULL)
    disk_gb: float | None = setting("disk for the run's checkpoints (null: free disk here)", GIGABYTES_OR_NULL)


@dataclass(frozen=True)
class EmaConfig:
    """``method.teacher.ema``: how fast the Co-rewarding-II teacher follows the policy."""

    enable: bool = setting("update the teacher by EMA")
    update_interval: int = setting("steps between updates", Rule(lambda v: v >= 1, ">= 1"))
    alpha_start: float = setting("the first update's rate", Rule(lambda v: 0 <= v <= 1, "in [0, 1]"))
    alpha_end: float = setting("the last update's rate (cosine between)", Rule(lambda v: 0 <= v <= 1, "in [0, 1]"))


@dataclass(frozen=True)
class TeacherConfig:
    """``method.teacher``: the EMA teacher of Co-rewarding-II and -III (their labels and the KL anchor)."""

    dtype: str = setting("its dtype (float32 only: config.teacher_dtype_problem says why)")
    ema: EmaConfig = setting("how it follows the policy")


QUESTION_VIEWS = ("original", "rephrased")


@dataclass(frozen=True, kw_only=True)
class MethodConfig:
    """``method`` (configs/method/*.yaml): a cell's reward method, the registered method it names
    (``corewarding.methods``) and what a run of it needs besides."""

    name: str = setting("the option's name: configs/method/<name>.yaml, a cell id's first part")
    hub_name: str = setting("its name in published repo ids ({Method}-{Model}-{Set})")
    reward: str = setting("the registered method that scores the rollouts (corewarding.methods.names())")
    views: tuple[str, ...] = setting(
        "the question views the policy samples: the registered method's views less the teacher's",
        Rule(lambda v: 0 < len(v) == len(set(v)) and set(v) <= set(QUESTION_VIEWS), "a list of original, rephrased"),
    )
    teacher: TeacherConfig | None = setting("an EMA teacher (null: none)", default=None)
    data_seed: int | None = setting(
        "the training set's shuffle seed (absent: the run's seed)",
        Rule(lambda v: v >= 0, "a whole number >= 0"),
        default=None,
    )
    train_on: str = setting(
        "the questions trained on (rephrased: the rephrasings only)", one_of(*QUESTION_VIEWS), default="original"
    )


POSITIVE_NUMBER = Rule(lambda v: v > 0, "a number > 0")


@dataclass(frozen=True)
class CellsConfig:
    """``cells`` (configs/pipeline.yaml): the cell runs of a work pool."""

    max_attempts: float = setting("starts of a cell whose worker died, at most", POSITIVE_NUMBER)
    lease_timeout_s: float = setting("a lease older than this is a dead worker's", POSITIVE_NUMBER)
    poll_s: float = setting("how often the parent looks at its cell runs", POSITIVE_NUMBER)


@dataclass(frozen=True)
class StoreConfig:
    """``store`` (configs/pipeline.yaml): the shared artifact store of a work pool."""

    url: str | None = setting("an fsspec URL or path (null or empty: none)")
    dvc_remote: str | None = setting("or a DVC remote's name: its URL + /corewarding")
    sync_interval_s: float = setting("seconds between pushes of a training run", POSITIVE_NUMBER)

    @property
    def configured(self) -> bool:
        """Whether a store is named (an empty string means none, as null does)."""
        return bool(self.url or self.dvc_remote)


ALERT_EVENTS = ("cell_failed", "collapse", "claim_changed")
_BLOCK_NAME = re.compile(r"(?:[a-z0-9-]+/)?[a-z0-9-]+")  # Prefect's rule for block type slugs and document names


@dataclass(frozen=True)
class AlertsConfig:
    """``alerts`` (configs/pipeline.yaml): a message through a Prefect notification block for each failed cell, new
    collapse flag or changed claim verdict (docs/orchestration.md#alerts)."""

    block: str | None = setting(
        "the notification block (null or empty: no alerts)",
        Rule(lambda v: not v or bool(_BLOCK_NAME.fullmatch(v)),
             "<block-type-slug>/<block-name> or a block's name (lowercase letters, digits, dashes; never a URL), "
             "or null"),
    )  # fmt: skip
    events: tuple[str, ...] = setting(
        "what sends a message",
        Rule(lambda v: all(e in ALERT_EVENTS for e in v), f"a list of {', '.join(ALERT_EVENTS)}"),
    )
    claims_file: str | None = setting("the claims whose verdicts are watched (null: configs/claims.yaml)")


@dataclass(frozen=True)
class MathVerifyConfig:
    """``math_verify`` (configs/eval.yaml): the math-verify checker's worker processes."""

    workers: int | None = setting(
        "worker processes (null: one per core)", Rule(lambda v: v >= 1, "an integer >= 1, or null (one per core)")
    )
    timeout_s: float = setting("seconds per comparison before it counts as wrong", Rule(lambda v: v > 0, "> 0"))


@dataclass(frozen=True)
class BootstrapConfig:
    """``bootstrap`` (configs/eval.yaml): the confidence interval of every score."""

    samples: int = setting("resamples of the problems", Rule(lambda v: v >= 0, ">= 0"))
    confidence: float = setting("the interval's coverage", Rule(lambda v: 0 < v < 1, "in (0, 1)"))


WHOLE_OR_NULL = Rule(lambda v: v >= 1, "a whole number >= 1, or null")
SEED = Rule(lambda v: v >= 0, "a whole number >= 0")
DTYPES = ("float32", "bfloat16", "float16")


@dataclass(frozen=True)
class PathsConfig:
    """``paths`` (configs/paths/default.yaml): where things are written, shared by every root."""

    runs_dir: str = setting("a cell's run directory is {runs_dir}/{cell_id}")
    data_dir: str = setting("prepared and rephrased sets (DVC outputs)")
    artifacts_dir: str = setting("locally built things (the tiny model, the tiny data)")


@dataclass(frozen=True, kw_only=True)
class ShapeConfig:
    """``base_model.shape``: a published model's config.json figures; the verl dry run's memory estimate reads them."""

    params_b: float = setting("parameters, in billions", POSITIVE)
    vocab_size: int = setting("vocabulary rows", AT_LEAST_1)
    hidden_size: int = setting("hidden width", AT_LEAST_1)
    num_layers: int = setting("transformer layers", AT_LEAST_1)
    tie_word_embeddings: bool = setting(
        "input and output embeddings shared (verl loads fp32 on every rank)", default=False
    )


@dataclass(frozen=True, kw_only=True)
class TinyModelConfig:
    """``base_model.tiny``: how the locally built random-weight model is built (tiny/model.py)."""

    seed: int = setting("weight seed", SEED)
    hidden_size: int = setting("hidden width", AT_LEAST_1)
    num_layers: int = setting("transformer layers", AT_LEAST_1)
    num_heads: int = setting("attention heads", AT_LEAST_1)
    head_dim: int | None = setting("per-head width (null: hidden_size / num_heads)", WHOLE_OR_NULL, default=None)
    vocab_size: int = setting("vocabulary rows", AT_LEAST_1)
    architecture: str = setting("the transformers class", one_of("qwen2", "qwen3"), default="qwen2")
    sft_steps: int = setting("supervised warm-start steps (> 0: learns the \\\\boxed format)", SEED)


@dataclass(frozen=True, kw_only=True)
class BaseModelConfig:
    """``base_model`` (configs/base_model/*.yaml): the policy's starting checkpoint."""

    name: str = setting("the option's name (cell ids and run folders use it)")
    hub_name: str = setting("its name in published repo ids ({Method}-{Model}-{Set})")
    hf_id: str | None = setting("the Hub id to load (null: built locally)")
    gated: bool = setting("the Hub serves it only with a token that accepted its licence", default=False)
    dtype: str = setting("the policy's dtype", one_of(*DTYPES))
    builder: str | None = setting("tiny: built here; null: loaded by transformers", one_of("tiny", why="tiny or null"))
    path: str | None = setting("a local folder, which wins over hf_id")
    shape: ShapeConfig | None = setting("published size figures (the verl memory plan)", default=None)
    tiny: TinyModelConfig | None = setting("the tiny model's build settings (builder=tiny)", default=None)


@dataclass(frozen=True)
class SizedSetConfig:
    """``dataset.tiny`` / ``datasource.tiny``: the generated arithmetic set's size and seed."""

    n_train: int = setting("training problems", AT_LEAST_1)
    seed: int = setting("generator seed", SEED)


@dataclass(frozen=True)
class TinySetConfig(SizedSetConfig):
    """``dataset.tiny``: the generated arithmetic set (train and test)."""

    n_test: int = setting("test problems", AT_LEAST_1)


@dataclass(frozen=True, kw_only=True)
class DatasetConfig:
    """``dataset`` (configs/dataset/*.yaml): the training set of a cell and its validation set."""

    name: str = setting("the option's name (cell ids use it)")
    hub_name: str = setting("its name in published repo ids")
    source: str = setting("where the rows come from (a Hub id, or generated)")
    train_files: str = setting("the prepared training parquet")
    rephrased_source: str | None = setting(
        "where rephrased pairs come from (null: the set has no choice)", one_of("release", "generate"), default=None
    )
    rephrased_dirs: dict[str, str] = setting("the pairs' folder per rephrased_source", default={})
    original_files: str = setting("the originals whose rephrasing was kept (Co-rewarding-I)")
    rephrased_files: str = setting("their rephrasings, row-aligned (Co-rewarding-I)")
    val_files: str = setting("the validation parquet")
    rephrased_release: str | None = setting("the paper's released rephrasing on the Hub (null: none)")
    dvc_stages: tuple[str, ...] = setting("DVC stages the pipeline reproduces before training on the set")
    dvc_paired_stages: dict[str, tuple[str, ...]] | tuple[str, ...] = setting(
        "stages that make the rephrased pairs: a list, or one list per rephrased_source"
    )
    tiny: TinySetConfig | None = setting("the generated set's size (source: generated)", default=None)


@dataclass(frozen=True)
class AnswerColumn:
    """One candidate of ``datasource.answer``: a column and how its ground truth is read."""

    column: str = setting("the column (a.b reads a nested field)")
    rule: str = setting("how the ground truth is read", one_of("last_boxed", "after_hashes", "as_given", "items"))


@dataclass(frozen=True, kw_only=True)
class DatasourceConfig:
    """``datasource`` (configs/datasource/*.yaml): one source set and how ``data prepare`` reads it."""

    name: str = setting("the set's name (its folder under paths.data_dir)")
    role: str = setting("train (shared by every model) or eval (kept whole)", one_of("train", "eval"))
    split: str = setting("the prepared file's split", one_of("train", "test"))
    hub_id: str | None = setting("the Hub dataset (null: local_file or generator)")
    hub_config: str | None = setting("the Hub dataset's config")
    hub_split: str | None = setting("the Hub split read")
    local_file: str | None = setting("a local parquet/json/jsonl copy; wins over hub_id")
    generator: str | None = setting("generate instead of reading a source", one_of("tiny", why="tiny or null"))
    tiny: SizedSetConfig | None = setting("the generated set's size (generator=tiny)", default=None)
    question: tuple[str, ...] = setting("candidate question columns, the first present wins")
    answer: tuple[AnswerColumn, ...] = setting("candidate ground-truth columns, the first present wins")
    top_level: tuple[str, ...] = setting("columns kept as top-level columns")
    extra_info: dict[str, str] = setting("extra_info key: source column")
    tokenizer: str | None = setting("counts prompt tokens (base_model: the root's; null: no length check)")
    rephrased_release: str | None = setting("the paper's released rephrasing (import-rephrased)", default=None)
    release_dir: str | None = setting("where import-rephrased writes", default=None)
    rephraser: str | None = setting("the configs/rephrase option data rephrase uses (null: not rephrased)")
    output: str = setting("the prepared parquet")


@dataclass(frozen=True, kw_only=True)
class LmEvalConfig:
    """``benchmark.lm_eval``: how an lm-evaluation-harness result is read."""

    filter: str = setting("lm-eval's filter name in its result keys", default="none")
    metrics: dict[str, str] = setting("our metric name: lm-eval's")
    mean_as: str | None = setting("also report the metrics' mean under this name", default=None)
    modules: tuple[str, ...] = setting("what the task's checkers import", default=())
    task_yaml: str | None = setting("lm-eval's task file, relative to lm_eval/tasks", default=None)


@dataclass(frozen=True, kw_only=True)
class BenchmarkConfig:
    """``benchmark`` (configs/benchmark/*.yaml): one evaluation set and how it is sampled and scored."""

    name: str = setting("the option's name")
    kind: str = setting("math: prepared rows and our checkers; external: an outside tool", one_of("math", "external"))
    datasource: str | None = setting("configs/datasource option it is prepared from (math)", default=None)
    data_file: str | None = setting("the prepared rows (math)", default=None)
    source_file: str | None = setting("a local copy to prepare from (null: the datasource's)", default=None)
    system_prompt: str | None = setting("training (the prepared rows' system message) or a literal text", default=None)
    answer_field: str | None = setting("the ground truth's dotted column (math)", default=None)
    metrics: tuple[str, ...] = setting("pass@k, avg@k, maj@k (math)", default=())
    tool: str | None = setting("the external tool", one_of("lm_eval", "livecodebench", "zeroeval"), default=None)
    task: str | None = setting("the tool's task name (external)", default=None)
    lm_eval: LmEvalConfig | None = setting("how lm-eval's result is read (tool=lm_eval)", default=None)
    n: int = setting("samples per problem", Rule(lambda v: v >= 1, "an integer >= 1"))
    temperature: float = setting("sampling temperature (0: greedy)", Rule(lambda v: v >= 0, ">= 0 (0: greedy)"))
    top_p: float = setting("nucleus sampling", Rule(lambda v: 0 < v <= 1, "in (0, 1]"))
    max_new_tokens: int = setting("tokens generated at most", Rule(lambda v: v >= 1, ">= 1"))
    limit: int | None = setting("the first N problems only (null: all)", Rule(lambda v: v >= 1, ">= 1 or null"))
    options: dict[str, Any] = setting("passed to the external tool", default={})


@dataclass(frozen=True, kw_only=True)
class GenerationConfig:
    """``generation`` (configs/generation/*.yaml): the evaluation's text-generation backend."""

    backend: str = setting(
        "transformers (CPU/GPU, batched) or vllm (GPU)", one_of("transformers", "vllm", why="transformers or vllm")
    )
    device: str | None = setting("transformers' device: cpu, cuda, cuda:1 (null: vllm's GPU)", default=None)
    dtype: str = setting("weights' dtype", one_of(*DTYPES))
    batch_size: int | None = setting("prompts per generate() call (transformers)", WHOLE_OR_NULL, default=None)
    tensor_parallel_size: int = setting("GPUs per vLLM engine", AT_LEAST_1, default=1)
    gpu_memory_utilization: float | None = setting(
        "vLLM's share of a GPU's memory", Rule(lambda v: 0 < v <= 1, "in (0, 1], or null"), default=None
    )
    max_model_len: int | None = setting("vLLM's context length (null: the model's)", WHOLE_OR_NULL, default=None)
    enforce_eager: bool = setting("vLLM without CUDA graphs", default=False)


@dataclass(frozen=True)
class ValidateConfig:
    """``validate`` (configs/data.yaml): which rows a prepared set drops, and the prompt-length limit."""

    max_prompt_tokens: int = setting(
        "prompt tokens allowed, the chat template applied", Rule(lambda v: v >= 1, "an integer >= 1")
    )
    drop: tuple[str, ...] = setting("reasons that drop a training row (the others are flagged)")
    drop_eval: tuple[str, ...] = setting("reasons that drop an evaluation row (datasource.role: eval)")


CHECK_ACTION = one_of("reject", "flag", "off")


@dataclass(frozen=True)
class RewriteCheck:
    """One check of ``rephrase.checks``: what a failed rewrite gets."""

    action: str = setting("reject (retry, then on_failure), flag (kept, listed) or off", CHECK_ACTION)


@dataclass(frozen=True)
class NumbersCheck(RewriteCheck):
    """``rephrase.checks.numbers``: the rewrite keeps the question's numbers."""

    min_kept_fraction: float = setting("the share of the question's numbers the rewrite keeps", UNIT_INTERVAL)
    ignore_single_digits: bool = setting("single digits are not counted")


@dataclass(frozen=True)
class RewriteChecks:
    """``rephrase.checks``: what makes a rewrite fail."""

    placeholder: RewriteCheck = setting("the rewrite holds the instruction's placeholder")
    unchanged: RewriteCheck = setting("the rewrite is the question again")
    numbers: NumbersCheck = setting("the rewrite dropped the question's numbers")


@dataclass(frozen=True)
class RephraseVllmConfig:
    """``rephrase.vllm``: the rephraser's vLLM engine."""

    tensor_parallel_size: int = setting("GPUs per engine", AT_LEAST_1)
    dtype: str = setting("weights' dtype", one_of(*DTYPES))
    gpu_memory_utilization: float = setting("vLLM's share of a GPU's memory", Rule(lambda v: 0 < v <= 1, "in (0, 1]"))
    max_model_len: int = setting("the engine's context length", AT_LEAST_1)


@dataclass(frozen=True, kw_only=True)
class RephraseConfig:
    """``rephrase`` (configs/rephrase/*.yaml): the rephraser of Co-rewarding-I's second view, or the checks of an
    imported rephrasing (backend none); the sampling keys only where it generates."""

    backend: str = setting("transformers, vllm, or none (import only)", one_of("transformers", "vllm", "none"))
    model: str | None = setting("a Hub id, a local folder or base_model (null: none, import only)")
    temperature: float | None = setting("sampling temperature", Rule(lambda v: v > 0, "> 0"), default=None)
    top_p: float | None = setting("nucleus sampling", Rule(lambda v: 0 < v <= 1, "in (0, 1]"), default=None)
    max_new_tokens: int | None = setting("tokens a rewrite may take", Rule(lambda v: v >= 1, ">= 1"), default=None)
    enable_thinking: bool | None = setting("the chat template's thinking mode", default=None)
    batch_size: int | None = setting("questions per generate call (the unit of resuming)", WHOLE_OR_NULL, default=None)
    seed: int = setting("the first attempt's sampling seed", SEED)
    max_retries: int = setting("new tries of a rejected row", Rule(lambda v: v >= 0, ">= 0"))
    on_failure: str = setting("what a row that never passes gets", one_of("keep_original", "drop"))
    checks: RewriteChecks = setting("what makes a rewrite fail")
    vllm: RephraseVllmConfig | None = setting("the engine of backend=vllm", default=None)


SECTIONS: dict[str, type] = {
    "grpo": GrpoConfig,
    "optimizer": OptimizerConfig,
    "schedule": ScheduleConfig,
    "vote": VoteConfig,
    "verl": VerlConfig,
    "paths": PathsConfig,
    "base_model": BaseModelConfig,
    "dataset": DatasetConfig,
    "method": MethodConfig,
}
EVAL_SECTIONS: dict[str, type] = {  # configs/eval.yaml
    "paths": PathsConfig,
    "benchmark": BenchmarkConfig,
    "generation": GenerationConfig,
    "math_verify": MathVerifyConfig,
    "bootstrap": BootstrapConfig,
}
DATA_SECTIONS: dict[str, type] = {  # configs/data.yaml (and a dataset where a command composes one)
    "paths": PathsConfig,
    "base_model": BaseModelConfig,
    "datasource": DatasourceConfig,
    "validate": ValidateConfig,
    "rephrase": RephraseConfig,
}
ROOT_SECTIONS: dict[str, dict[str, type]] = {"config": SECTIONS, "eval": EVAL_SECTIONS, "data": DATA_SECTIONS}


@cache
def _hints(schema: type) -> dict[str, Any]:
    return typing.get_type_hints(schema)


def _name(hint: Any) -> str:
    """``int``, ``list[str]``, ``float | None``: a type as the docs write it."""
    return hint.__name__ if isinstance(hint, type) else str(hint).replace("typing.", "")


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _of_type(value: Any, hint: Any) -> bool:
    """Whether ``value`` is of the annotated type (an int counts as a float; a bool never as a number)."""
    if isinstance(hint, types.UnionType):
        return any(_of_type(value, arm) for arm in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if hint is Any:
        return True
    origin = typing.get_origin(hint)
    if origin in (list, tuple):
        items = typing.get_args(hint)
        return isinstance(value, list | tuple) and all(_of_type(v, items[0]) for v in value)
    if origin is dict:
        key, item = typing.get_args(hint)
        return isinstance(value, dict) and all(_of_type(k, key) and _of_type(v, item) for k, v in value.items())
    if hint is float:
        return _number(value)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint)


def field_problem(schema: type, name: str, value: Any) -> str | None:
    """What ``value`` of ``schema``'s field ``name`` must be, or None when it is fine."""
    [spec] = [f for f in fields(schema) if f.name == name]
    rule: Rule | None = spec.metadata["rule"]
    hint = _hints(schema)[name]
    optional = isinstance(hint, types.UnionType) and type(None) in typing.get_args(hint)
    requirement = rule.requirement if rule else f"of type {_name(hint)}"  # an optional field's rule says "or null"
    if optional and value is None:
        return None
    if not _of_type(value, hint):
        return requirement
    try:
        good = rule is None or bool(rule.ok(value))
    except TypeError:
        good = False
    return None if good else requirement


def _fits(hint: Any, value: Any) -> bool:
    """Whether ``value`` has the container shape of ``hint`` (a mapping for a schema or a dict, a list for a tuple)."""
    origin = typing.get_origin(hint) or hint
    if is_dataclass(hint) or origin is dict:
        return isinstance(value, Mapping)
    return origin is tuple and isinstance(value, list | tuple)


def _built(hint: Any, value: Any, key: str) -> Any:
    """``value`` as the annotated type: a nested schema's mapping read by ``typed``, a list as a tuple (inside a
    dict too); anything else as it is, for ``field_problem`` to judge."""
    if isinstance(hint, types.UnionType):
        arms = [arm for arm in typing.get_args(hint) if _fits(arm, value)]
        return _built(arms[0], value, key) if arms else value
    if is_dataclass(hint) and isinstance(value, Mapping):
        return typed(typing.cast(type, hint), value, key)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is tuple and isinstance(value, list | tuple):
        return tuple(_built(args[0], v, f"{key}[{i}]") for i, v in enumerate(value))
    if origin is dict and isinstance(value, Mapping):
        return {k: _built(args[1], v, f"{key}.{k}") for k, v in value.items()}
    return value


def _has_default(spec: Any) -> bool:
    return spec.default is not MISSING or spec.default_factory is not MISSING


def typed(schema: type[T], section: Mapping[str, Any] | DictConfig | None, prefix: str) -> T:
    """The section as a ``schema`` object; ConfigError naming the first key that is missing, unknown, of the wrong
    type or out of range. A field with a default may be left out; a nested schema is read the same way."""
    raw = OmegaConf.to_container(section, resolve=True) if isinstance(section, DictConfig) else dict(section or {})
    if not isinstance(raw, dict):
        raise ConfigError(f"{prefix}: must be a mapping of its keys, got {raw!r}")
    values: dict[str, Any] = {
        str(k): OmegaConf.to_container(v) if isinstance(v, Container) else v for k, v in raw.items()
    }
    specs = fields(schema)  # type: ignore[arg-type]  # every schema is a dataclass; T is not bound to one
    known = [f.name for f in specs]
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise ConfigError(f"{prefix}.{unknown[0]}: unknown key; {prefix} has {', '.join(known)}")
    hints = _hints(schema)  # type: ignore[arg-type]  # as above: a dataclass type
    for spec in specs:
        name = spec.name
        if name not in values:
            if _has_default(spec):
                continue
            raise ConfigError(f"{prefix}.{name}: missing")
        given = values[name]
        values[name] = _built(hints[name], given, f"{prefix}.{name}")
        problem = field_problem(schema, name, values[name])
        if problem is not None:
            raise ConfigError(f"{prefix}.{name}={given!r}: must be {problem}")
    return schema(**values)


def section_of(cfg: DictConfig, schema: type[T]) -> T:
    """The composed config's section of ``schema`` (one of ``ROOT_SECTIONS``' tables), typed: what a module takes
    instead of the whole config."""
    prefix = next(name for table in ROOT_SECTIONS.values() for name, known in table.items() if known is schema)
    return typed(schema, OmegaConf.select(cfg, prefix), prefix)


def key_problem(key: str, value: Any) -> str | None:
    """``field_problem`` by dotted key (``optimizer.lr``), for the sections of ``SECTIONS``."""
    section, _, name = key.partition(".")
    return field_problem(SECTIONS[section], name, value)


def describe(schema: type) -> list[tuple[str, str, str, str]]:
    """(field, type, range, doc) of each field: the schema as a table for the docs and ``config show``."""
    hints = _hints(schema)
    rows = []
    for spec in fields(schema):
        rule = spec.metadata["rule"]
        hint = hints[spec.name]
        rows.append((spec.name, _name(hint), rule.requirement if rule else "", spec.metadata["doc"]))
    return rows
