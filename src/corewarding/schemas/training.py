"""The training root's sections (``configs/config.yaml``): grpo, optimizer, schedule, vote, verl, and the method with
its EMA teacher."""

from __future__ import annotations

from dataclasses import dataclass

from corewarding.schemas.reading import (
    AT_LEAST_1,
    AT_LEAST_1_OR_NULL,
    BETAS,
    GIGABYTES_OR_NULL,
    NON_NEGATIVE,
    POSITIVE,
    UNIT_INTERVAL,
    Rule,
    one_of,
    setting,
)


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
