"""How much GPU memory, host memory and disk a verl cell needs: arithmetic on the composed config (no torch, no verl).

The estimate follows what verl 0.9.1 keeps where (read from its FSDP engine, ``engine_workers.py`` and its vLLM
rollout; ``docs/gpu-plan.md`` works one 8B cell through it with the verl lines). One GB here is 2**30 bytes, as
``nvidia-smi`` and torch report memory.

GPU memory per device is the largest of five phases, because verl puts vLLM to sleep (level 2: weights and KV cache
both freed, ``rollout.free_cache_engine``) before it computes log-probs or trains, and wakes it in two steps (weights,
then the KV cache) for the rollout:

* always resident (unless ``verl.actor_param_offload``): the actor's FSDP shard of fp32 weights and AdamW's two fp32
  states (12 bytes per parameter over all GPUs; the states exist from the first optimizer step on) and
  ``OVERHEAD_GB`` (CUDA context, NCCL buffers, allocator slack). The reference/teacher never is: verl builds it
  forward-only, which forces FSDP's CPU offload whatever ``ref.fsdp_config.param_offload`` says, so its shards stay
  pinned on the host and stream to the GPU one FSDP unit at a time;
* rollout: + ``gpu_memory_utilization`` x ``verl.gpu_memory_gb``, vLLM's whole budget (its bf16 weights and KV cache);
* weight_sync (every step, and again for the teacher's rollouts): + vLLM's bf16 weights, woken before the KV cache,
  + the transfer bucket + the largest parameter (the embedding) gathered in fp32, and its copy in the rollout dtype;
* old_log_prob (the actor's no-grad pass, entropy on for every method): + the bf16 logits of one log-prob micro-batch
  + the entropy's temporaries (verl's chunked entropy: an fp32 copy, its softmax and their product, per chunk of rows;
  unchunked: the softmax and the product at the logits' size) or the fp32 working set of each logits statistic the
  worker's probe computes (Self-Certainty's chunk), whichever is larger (they run one after the other) + sdpa's
  dense packed mask;
* ref_log_prob: + the logits of one log-prob micro-batch + the mask (no entropy);
* train: + fp32 gradient shards (4 bytes per parameter over all GPUs) + the bf16 logits of one training micro-batch
  and their gradient (x 2) + the layer inputs gradient checkpointing keeps (micro-batch x tokens x hidden x layers x
  2) + the mask.

With remove-padding (which the translation turns on) transformers' sdpa gets one packed row per micro-batch and builds
a dense boolean (tokens x tokens) mask for it, which torch turns into an additive bias of the query's dtype on CUDA:
3 bytes per element of (micro-batch x tokens)^2. flash_attention_2 needs none.

Host memory per node is the largest of start-up (each rank that loads the model holds the full fp32 model and its
own shard; the reference's pinned shards are already there), steady state (the reference's pinned shards, the
offloaded actor's state) and the teacher's save (its shards cloned to the host). Disk is the run's checkpoint folder
at its largest. ``plan_cell`` with a ``Machine`` also checks the host memory and disk of the machine the dry run runs
on, unless ``verl.host_memory_gb`` / ``verl.disk_gb`` give other figures.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from corewarding.methods.logits_statistics import logits_statistic
from corewarding.schemas import BaseModelConfig, GrpoConfig, MethodConfig, ScheduleConfig, VerlConfig, section_of
from corewarding.training.common import cell_of
from corewarding.training.verl.attention import PER_SEQUENCE, choose_attention
from corewarding.training.verl.verl_config import probed_statistics, reference_dtype

GB = 2**30
OVERHEAD_GB = 2.0  # per device: CUDA context, NCCL buffers, allocator fragmentation (not modelled in detail)
DTYPE_BYTES = {"float32": 4, "fp32": 4, "bfloat16": 2, "bf16": 2, "float16": 2, "fp16": 2}
ADAM_STATE_BYTES = 8  # exp_avg + exp_avg_sq, fp32
MASTER_BYTES = 4  # fp32 master weights (model_dtype fp32, bf16 compute)
GRAD_BYTES = 4
LOGITS_BYTES = 2  # bf16 logits (the lm_head runs in FSDP's bf16 param dtype)
HF_EXPORT_BYTES = 2  # the merged Hugging Face folder, bf16
MASK_BYTES = 1 + 2  # sdpa/eager: the boolean packed mask + torch's additive bias in the query's dtype (bf16)
ENTROPY_TEMPORARIES = 3  # chunked: fp32 copy, softmax, product (logsumexp's temporary replaces the product)


@dataclass(frozen=True)
class ModelShape:
    """What the estimate needs of a base model."""

    params: float  # parameter count
    vocab_size: int
    hidden_size: int
    num_layers: int
    tied_embeddings: bool = False  # verl then loads the full model on every rank (no meta-device init)


@dataclass(frozen=True)
class VerlFacts:
    """What the plan reads from the translated verl config; ``VerlFacts.default`` is what ``verl_config`` emits."""

    ref_dtype: str  # the reference/teacher's model_dtype
    entropy_chunk_rows: int  # verl's entropy_from_logits_chunk_size; 0: entropy_from_logits_with_chunking off
    strategy: str = "fsdp2"  # fsdp (FSDP1) pins a gradient buffer beside each offloaded shard; fsdp2 does not
    bucket_mb: int = 2048  # rollout.checkpoint_engine.update_weights_bucket_megabytes
    rollout_dtype: str = "bfloat16"
    logits_dtype: str = "bfloat16"  # the lm_head's compute dtype: FSDP's mixed-precision param dtype
    remove_padding: bool = True  # model.use_remove_padding (attention.choose_attention's packing)
    attn_kernel: str = "sdpa"  # model.override_config.attn_implementation (choose_attention's kernel)

    @classmethod
    def default(cls, cfg: DictConfig, flash_attn: bool | None = None) -> VerlFacts:
        """What the translation emits for ``cfg``; ``flash_attn`` as in ``choose_attention`` (default: try here)."""
        attention = choose_attention(section_of(cfg, VerlConfig), flash_attn)
        return cls(
            ref_dtype=reference_dtype(cfg),
            entropy_chunk_rows=2048,
            remove_padding=attention.packed,
            attn_kernel=attention.kernel,
        )

    @classmethod
    def of(cls, verl_cfg: DictConfig) -> VerlFacts:
        """The facts of a resolved verl config (``verl_config.to_verl_config``)."""
        arr = verl_cfg.actor_rollout_ref
        engine = arr.actor.fsdp_config  # what verl's FSDP engine reads (interpolated from actor.*)
        chunked = bool(engine.entropy_from_logits_with_chunking)
        kernel = arr.model.override_config.get("attn_implementation", "flash_attention_2")  # raw read: verl's default
        return cls(
            ref_dtype=str(arr.ref.fsdp_config.model_dtype),
            entropy_chunk_rows=int(engine.entropy_from_logits_chunk_size) if chunked else 0,
            strategy=str(arr.actor.strategy),
            bucket_mb=int(arr.rollout.checkpoint_engine.update_weights_bucket_megabytes),
            rollout_dtype=str(arr.rollout.dtype),
            logits_dtype=compute_dtype(engine),
            remove_padding=bool(arr.model.use_remove_padding),
            attn_kernel=str(kernel),
        )


def compute_dtype(engine: DictConfig) -> str:
    """The dtype verl's FSDP engine computes in, hence the logits': ``mixed_precision.param_dtype`` (bf16 when
    unset), the FSDP param dtype and the autocast dtype of its forward (``transformer_impl.py`` ~391-403, ~1559).
    ``fsdp_config.dtype`` is not read by that engine."""
    mixed = engine.get("mixed_precision") or {}  # raw read: verl's engine config, bf16 when unset
    name = str(mixed.get("param_dtype", "bf16"))
    return {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}.get(name, name)


@dataclass(frozen=True)
class Machine:
    """The host memory and free disk of the machine the dry run runs on (what is checked when the config gives
    no ``verl.host_memory_gb`` / ``verl.disk_gb``)."""

    host_gb: float
    disk_gb: float
    disk_path: str  # the folder whose filesystem was measured


def nearest_existing(path: Path) -> Path:
    """``path`` or its nearest parent that exists (a run folder is created only when training starts)."""
    path = path.absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def this_machine(run_dir: Path) -> Machine:
    """Total physical memory of this machine and the free space of the filesystem that will hold ``run_dir``."""
    host = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    folder = nearest_existing(run_dir)
    return Machine(host / GB, shutil.disk_usage(folder).free / GB, str(folder))


@dataclass
class ResourcePlan:
    """A cell's estimated needs in GB (2**30 bytes) and why it does not fit the machine, if it does not."""

    cell_id: str
    gpu_gb: float  # per device, the largest phase
    gpu_phase: str  # which phase that is: rollout, weight_sync, old_log_prob, ref_log_prob or train
    host_gb: float  # per node, the largest host phase
    disk_gb: float | None  # None: verl.checkpoints_to_keep=null and no schedule.total_steps to count saves
    phases: dict[str, float] = field(default_factory=dict)
    host_phases: dict[str, float] = field(default_factory=dict)
    sync_gb_per_step: float = 0.0  # bytes pushed to vLLM per step (the actor's weights, and the teacher's)
    problems: list[str] = field(default_factory=list)

    @property
    def fits(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict[str, Any]:
        return {
            "cell_id": self.cell_id,
            "gpu_gb_per_device": round(self.gpu_gb, 1),
            "gpu_phase": self.gpu_phase,
            "host_gb": round(self.host_gb, 1),
            "disk_gb": None if self.disk_gb is None else round(self.disk_gb, 1),
            "phases_gb": {k: round(v, 1) for k, v in self.phases.items()},
            "host_phases_gb": {k: round(v, 1) for k, v in self.host_phases.items()},
            "sync_gb_per_step": round(self.sync_gb_per_step, 1),
            "fits": self.fits,
            "problems": list(self.problems),
        }


def model_shape(cfg: DictConfig) -> ModelShape:
    """``base_model.shape`` (the published models), or the tiny model's shape counted from its build settings."""
    model = section_of(cfg, BaseModelConfig)
    shape = model.shape
    if shape is not None:
        return ModelShape(
            shape.params_b * 1e9, shape.vocab_size, shape.hidden_size, shape.num_layers, shape.tie_word_embeddings
        )
    tiny = model.tiny
    if tiny is None:
        raise KeyError(
            f"base_model {model.name!r} has no shape: add base_model.shape (params_b, vocab_size, "
            f"hidden_size, num_layers, tie_word_embeddings: the model's config.json) to "
            f"configs/base_model/{model.name}.yaml"
        )
    h, layers, vocab = tiny.hidden_size, tiny.num_layers, tiny.vocab_size
    # tiny_model: Qwen2, tied embeddings, MLP 4h, q/k/v biases, two norms per layer and a final one
    params = vocab * h + layers * (16 * h * h + 5 * h) + h
    return ModelShape(float(params), vocab, h, layers, tied_embeddings=True)


def has_reference(cfg: DictConfig) -> bool:
    """Whether the run has a reference model (the KL anchor, or Co-rewarding-II/III's teacher)."""
    return has_teacher(cfg) or section_of(cfg, GrpoConfig).use_kl_loss


def has_teacher(cfg: DictConfig) -> bool:
    """Whether the method has an EMA teacher (Co-rewarding-II/III)."""
    return section_of(cfg, MethodConfig).teacher is not None


def logits_gb(micro_batch: int, tokens: int, vocab: int, dtype_bytes: int = LOGITS_BYTES) -> float:
    """The logits of one micro-batch (bf16 unless told otherwise)."""
    return micro_batch * tokens * vocab * dtype_bytes / GB


def mask_gb(micro_batch: int, tokens: int, attn_implementation: str, packed: bool = True) -> float:
    """sdpa's (and eager's) dense mask over one packed micro-batch: (micro-batch x tokens)^2 x 3 bytes; the kernels
    that attend per sequence (flash_attention_2, flex_attention's block mask of a few KB): 0. Unpacked (no
    remove-padding): one (tokens x tokens) mask per sequence."""
    if attn_implementation in PER_SEQUENCE:
        return 0.0
    if not packed:
        return micro_batch * tokens * tokens * MASK_BYTES / GB
    nnz = micro_batch * tokens
    return nnz * nnz * MASK_BYTES / GB


def entropy_gb(micro_batch: int, tokens: int, vocab: int, chunk_rows: int, dtype_bytes: int = LOGITS_BYTES) -> float:
    """The entropy's temporaries beside the logits (verl's ``entropy_from_logits[_with_chunking]``)."""
    if chunk_rows <= 0:  # softmax(logits) and softmax * logits, both in the logits' dtype
        return 2 * logits_gb(micro_batch, tokens, vocab, dtype_bytes)
    return ENTROPY_TEMPORARIES * min(chunk_rows, micro_batch * tokens) * vocab * 4 / GB


def statistic_gb(name: str, tokens: int, vocab: int, chunk_tokens: int) -> float:
    """The fp32 working set of the probe's logits statistic ``name`` over a micro-batch of ``tokens`` positions: its
    ``fp32_copies`` at one chunk's size, or at the whole micro-batch's when it is not chunked or ``chunk_tokens`` is 0
    or less (Self-Certainty: its fp32 chunk and logsumexp's temporary)."""
    statistic = logits_statistic(name)
    rows = chunk_tokens if statistic.chunked and chunk_tokens > 0 else tokens
    return rows * vocab * 4 * statistic.fp32_copies / GB


def phase_terms(
    cfg: DictConfig,
    shape: ModelShape,
    facts: VerlFacts,
    log_prob_tokens: int | None = None,
    train_tokens: int | None = None,
) -> dict[str, float]:
    """What each worker phase adds per device (GB) on top of what is always resident: ``old_log_prob``,
    ``ref_log_prob`` (with a reference), ``train`` (gradients included) and ``save``.

    The tokens of a micro-batch default to ``max_prompt_length + max_response_length`` (responses at full length);
    ``perf/memory_plan_check.py`` passes a measured run's longest sequences instead. The logits' dtype is
    ``facts.logits_dtype`` (bf16 on GPUs, fp32 in the CPU run). Without remove-padding (padded sdpa or eager, the
    auto choice where flash-attn does not import) verl takes its padded branch (``transformer_impl.py``
    ~1476-1520): the entropy is computed unchunked whatever the chunking setting (``verl_F.entropy_from_logits``,
    ~1489), and the real rows are copied out of the padded logits with ``torch.cat`` (~1500) before the log-probs:
    one more copy of the logits beside them.
    """
    v, g = section_of(cfg, VerlConfig), section_of(cfg, GrpoConfig)
    per_device = shape.params / (v.nnodes * v.n_gpus_per_node) / GB
    full = g.max_prompt_length + g.max_response_length
    lp_tokens, tokens = log_prob_tokens or full, train_tokens or full
    attn, packed = facts.attn_kernel, facts.remove_padding
    nbytes = DTYPE_BYTES[facts.logits_dtype]
    scaled = 1 if g.temperature == 1.0 else 2  # logits / temperature is a second copy
    mb_lp, mb = g.log_prob_micro_batch_size, g.micro_batch_size
    lp_logit = logits_gb(mb_lp, lp_tokens, shape.vocab_size, nbytes)
    lp_logits = scaled * lp_logit
    chunk_rows = facts.entropy_chunk_rows if packed else 0  # the padded branch never chunks
    extra = entropy_gb(mb_lp, lp_tokens, shape.vocab_size, chunk_rows, nbytes)
    for name in probed_statistics(section_of(cfg, MethodConfig).reward):  # one after another from the same logits
        extra = max(extra, statistic_gb(name, mb_lp * lp_tokens, shape.vocab_size, v.self_certainty_chunk_tokens))
    unpadded_copy = 0.0 if packed else lp_logit  # the padded branch's torch.cat of the real rows
    terms = {"old_log_prob": lp_logits + max(extra, unpadded_copy) + mask_gb(mb_lp, lp_tokens, attn, packed)}
    if has_reference(cfg):
        terms["ref_log_prob"] = lp_logits + unpadded_copy + mask_gb(mb_lp, lp_tokens, attn, packed)
    train_logit = logits_gb(mb, tokens, shape.vocab_size, nbytes)
    activations = mb * tokens * shape.hidden_size * shape.num_layers * 2 / GB
    train_copies = 1 + scaled + (0 if packed else 2)  # unpadded: the torch.cat copy and its gradient too
    terms["train"] = (
        GRAD_BYTES * per_device + train_copies * train_logit + activations + mask_gb(mb, tokens, attn, packed)
    )
    # save: verl's FSDP2 checkpoint streams the actor's shards as they are (torch.save); the teacher's shards are
    # cloned to the host first (save_teacher_shards), which is the device on CPU and pinned host memory on GPUs
    terms["save"] = DTYPE_BYTES[facts.ref_dtype] * per_device if has_teacher(cfg) else 0.0
    return terms


def gpu_phases(cfg: DictConfig, shape: ModelShape, facts: VerlFacts) -> dict[str, float]:
    """Per-device GB of each phase (see the module docstring)."""
    v = section_of(cfg, VerlConfig)
    per_device = shape.params / (v.nnodes * v.n_gpus_per_node) / GB  # GB that one byte per parameter takes on one
    actor_offload = v.actor_param_offload
    resident = OVERHEAD_GB + (0.0 if actor_offload else (MASTER_BYTES + ADAM_STATE_BYTES) * per_device)
    terms = phase_terms(cfg, shape, facts)
    rollout_bytes = DTYPE_BYTES[facts.rollout_dtype]
    largest = shape.vocab_size * shape.hidden_size / GB  # the embedding (and the untied lm_head): one full tensor
    teacher_cast = rollout_bytes * largest if has_teacher(cfg) else 0.0
    phases = {
        "rollout": resident + v.gpu_memory_utilization * v.gpu_memory_gb,
        "weight_sync": resident
        + rollout_bytes * shape.params / v.tensor_parallel_size / GB
        + facts.bucket_mb / 1024
        + MASTER_BYTES * largest
        + teacher_cast,
        "old_log_prob": resident + (MASTER_BYTES * per_device if actor_offload else 0.0) + terms["old_log_prob"],
    }
    if "ref_log_prob" in terms:
        phases["ref_log_prob"] = resident + terms["ref_log_prob"]
    offloaded_state = (MASTER_BYTES + ADAM_STATE_BYTES) * per_device if actor_offload else 0.0
    phases["train"] = resident + offloaded_state + terms["train"]
    return phases


def sync_gb_per_step(cfg: DictConfig, shape: ModelShape) -> float:
    """What verl pushes into vLLM each step: the actor's fp32 weights (verl 0.9.1 sends them uncast) and, for the
    teacher methods, the teacher's in the rollout dtype (``worker.corewarding_teacher_to_rollout`` casts)."""
    teacher = DTYPE_BYTES["bfloat16"] if has_teacher(cfg) else 0
    return (MASTER_BYTES + teacher) * shape.params / GB


def host_phases(cfg: DictConfig, shape: ModelShape, facts: VerlFacts) -> dict[str, float]:
    """Host GB per node at start-up, in steady state and while the teacher's shards are saved."""
    v = section_of(cfg, VerlConfig)
    nnodes, per_node_gpus = v.nnodes, v.n_gpus_per_node
    per_node = shape.params / nnodes / GB
    ref = DTYPE_BYTES[facts.ref_dtype] * per_node if has_reference(cfg) else 0.0
    pinned = ref * (2 if facts.strategy == "fsdp" else 1)  # FSDP1's CPUOffload pins a gradient beside each shard
    # start-up: untied models are loaded on global rank 0 only (the others on the meta device); tied ones on every
    # rank. Each loading rank holds the full fp32 model and, once sharded, its own shard beside it.
    loaders = per_node_gpus if shape.tied_embeddings else 1
    full_load = loaders * MASTER_BYTES * shape.params * (1 + 1 / (nnodes * per_node_gpus)) / GB
    steady = pinned + ((MASTER_BYTES + ADAM_STATE_BYTES + GRAD_BYTES) * per_node if v.actor_param_offload else 0)
    phases = {"start_up": pinned + full_load, "steady": steady}
    if has_teacher(cfg):  # save_teacher_shards clones each rank's shards to the host before torch.save
        phases["teacher_save"] = steady + ref
    return phases


def checkpoints_kept(cfg: DictConfig) -> int | None:
    """``verl.checkpoints_to_keep``; null keeps every save: counted from total_steps."""
    keep = section_of(cfg, VerlConfig).checkpoints_to_keep
    if keep is not None:
        return keep
    schedule = section_of(cfg, ScheduleConfig)
    return None if schedule.total_steps is None else max(1, schedule.total_steps // schedule.save_freq)


def disk_gb(cfg: DictConfig, shape: ModelShape, facts: VerlFacts) -> float | None:
    """Kept checkpoints x (fp32 model shards + teacher shards + merged bf16 export) + the newest one's optimizer."""
    keep = checkpoints_kept(cfg)
    if keep is None:
        return None
    teacher_bytes = DTYPE_BYTES[facts.ref_dtype] if has_teacher(cfg) else 0
    per_checkpoint = (MASTER_BYTES + teacher_bytes + HF_EXPORT_BYTES) * shape.params / GB
    return keep * per_checkpoint + ADAM_STATE_BYTES * shape.params / GB


def _problems(plan: ResourcePlan, v: VerlConfig, machine: Machine | None) -> list[str]:
    out = []
    if plan.gpu_gb > v.gpu_memory_gb:
        out.append(
            f"needs {plan.gpu_gb:.1f} GB of GPU memory per device (its {plan.gpu_phase} phase), "
            f"more than verl.gpu_memory_gb={v.gpu_memory_gb}"
        )
    host_phase = max(plan.host_phases, key=lambda k: plan.host_phases[k])
    if v.host_memory_gb is not None:
        if plan.host_gb > v.host_memory_gb:
            out.append(
                f"needs {plan.host_gb:.1f} GB of host memory per node (its {host_phase}), "
                f"more than verl.host_memory_gb={v.host_memory_gb}"
            )
    elif machine is not None and plan.host_gb > machine.host_gb:
        out.append(
            f"needs {plan.host_gb:.1f} GB of host memory per node (its {host_phase}), more than this machine's "
            f"{machine.host_gb:.1f} GB (set verl.host_memory_gb=GB to plan for the training nodes instead)"
        )
    disk = plan.disk_gb
    if v.disk_gb is not None:
        if disk is None:
            out.append(
                f"verl.checkpoints_to_keep=null keeps every checkpoint, so disk use is unbounded; "
                f"set it (or schedule.total_steps) to check verl.disk_gb={v.disk_gb}"
            )
        elif disk > v.disk_gb:
            out.append(f"needs {disk:.1f} GB of checkpoint disk, more than verl.disk_gb={v.disk_gb}")
    elif machine is not None and disk is not None and disk > machine.disk_gb:
        out.append(
            f"needs {disk:.1f} GB of checkpoint disk, more than the {machine.disk_gb:.1f} GB free under "
            f"{machine.disk_path} (set verl.disk_gb=GB to plan for the training machine's disk instead)"
        )
    return out


def plan_cell(cfg: DictConfig, facts: VerlFacts | None = None, machine: Machine | None = None) -> ResourcePlan:
    """The estimate for ``cfg``'s cell.

    ``facts`` come from the translated verl config (``VerlFacts.of``; default: what the translation emits).
    ``machine``: where ``verl.host_memory_gb`` / ``verl.disk_gb`` are null, check this machine's figures instead
    (the dry run passes ``this_machine``); without it, null limits are not checked.
    """
    verl = section_of(cfg, VerlConfig)  # a limit out of range: ConfigError naming it
    shape = model_shape(cfg)
    facts = facts or VerlFacts.default(cfg)
    phases = gpu_phases(cfg, shape, facts)
    phase = max(phases, key=lambda k: phases[k])
    hosts = host_phases(cfg, shape, facts)
    plan = ResourcePlan(
        cell_of(cfg).cell_id,
        phases[phase],
        phase,
        max(hosts.values()),
        disk_gb(cfg, shape, facts),
        phases,
        hosts,
        sync_gb_per_step(cfg, shape),
    )
    plan.problems = _problems(plan, verl, machine)
    return plan


def table(plans: list[ResourcePlan]) -> str:
    """One row per cell: cell id, GPU GB per device, host GB, disk GB, fits."""
    width = max([len("cell"), *(len(p.cell_id) for p in plans)])
    rows = [f"{'cell':<{width}}  {'gpu_gb/device':>13}  {'host_gb':>7}  {'disk_gb':>7}  fits"]
    for p in plans:
        disk = "?" if p.disk_gb is None else f"{p.disk_gb:.1f}"
        rows.append(
            f"{p.cell_id:<{width}}  {p.gpu_gb:>13.1f}  {p.host_gb:>7.1f}  {disk:>7}  {'yes' if p.fits else 'no'}"
        )
    return "\n".join(rows)
