"""How much GPU memory, host memory and disk a verl cell needs: arithmetic on the composed config (no torch, no verl).

The estimate follows what verl 0.9.1 keeps where (read from its FSDP engine and vLLM rollout code; ``docs/gpu-plan.md``
works one 8B cell through it). One GB here is 2**30 bytes, as ``nvidia-smi`` and torch report memory.

GPU memory per device is the largest of three phases, because verl puts vLLM to sleep (level 2: weights and KV cache
both freed, ``rollout.free_cache_engine``) before it computes log-probs or trains, and wakes it for the rollout:

* always resident (unless offloaded): the actor's FSDP shard of fp32 weights and AdamW's two fp32 states (12 bytes per
  parameter over all GPUs; the states exist from the first optimizer step on), the reference/teacher's shard when
  ``verl.ref_param_offload`` is false, and ``OVERHEAD_GB`` (CUDA context, NCCL buffers, allocator slack);
* rollout: + ``gpu_memory_utilization`` x ``verl.gpu_memory_gb``, vLLM's whole budget (its bf16 weights and KV cache);
* log-prob pass: + the offloaded reference/teacher's shard loaded for its pass + the bf16 logits of one log-prob
  micro-batch (``log_prob_micro_batch_size`` x (prompt + response) x vocab x 2 bytes; Self-Certainty adds one fp32 chunk
  and its softmax, ``verl.self_certainty_chunk_tokens`` x vocab x 4 x 2 bytes);
* training: + fp32 gradient shards (4 bytes per parameter over all GPUs) + the bf16 logits of one training micro-batch
  and their gradient (x 2) + the layer inputs gradient checkpointing keeps (micro-batch x tokens x hidden x layers x 2).

With ``verl.actor_param_offload`` the actor's weights and states live on the host outside training (its phase loads
them back). Host memory is per node; disk is the run's checkpoint folder at its largest.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omegaconf import DictConfig

from corewarding.config import ConfigError
from corewarding.training.common import cell_of
from corewarding.training.verl.verl_config import reference_dtype

GB = 2**30
OVERHEAD_GB = 2.0  # per device: CUDA context, NCCL buffers, allocator fragmentation (not modelled in detail)
DEFAULT_CHECKPOINTS_TO_KEEP = 2
DEFAULT_GPU_MEMORY_GB = 80
DTYPE_BYTES = {"float32": 4, "fp32": 4, "bfloat16": 2, "bf16": 2, "float16": 2, "fp16": 2}
ADAM_STATE_BYTES = 8  # exp_avg + exp_avg_sq, fp32
MASTER_BYTES = 4  # fp32 master weights (model_dtype fp32, bf16 compute)
GRAD_BYTES = 4
HF_EXPORT_BYTES = 2  # the merged Hugging Face folder, bf16


@dataclass(frozen=True)
class ModelShape:
    """What the estimate needs of a base model."""

    params: float  # parameter count
    vocab_size: int
    hidden_size: int
    num_layers: int


@dataclass
class ResourcePlan:
    """A cell's estimated needs in GB (2**30 bytes) and why it does not fit the machine, if it does not."""

    cell_id: str
    gpu_gb: float  # per device, the largest phase
    gpu_phase: str  # which phase that is: rollout, log_prob or train
    host_gb: float  # per node
    disk_gb: float | None  # None: verl.checkpoints_to_keep=null and no schedule.total_steps to count saves
    phases: dict[str, float] = field(default_factory=dict)
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
            "fits": self.fits,
            "problems": list(self.problems),
        }


def model_shape(cfg: DictConfig) -> ModelShape:
    """``base_model.shape`` (the published models), or the tiny model's shape counted from its build settings."""
    shape = cfg.base_model.get("shape")
    if shape is not None:
        return ModelShape(
            float(shape.params_b) * 1e9, int(shape.vocab_size), int(shape.hidden_size), int(shape.num_layers)
        )
    tiny = cfg.base_model.get("tiny")
    if tiny is None:
        raise KeyError(
            f"base_model {cfg.base_model.name!r} has no shape: add base_model.shape (params_b, vocab_size, "
            f"hidden_size, num_layers: the model's config.json) to configs/base_model/{cfg.base_model.name}.yaml"
        )
    h, layers, vocab = int(tiny.hidden_size), int(tiny.num_layers), int(tiny.vocab_size)
    # tiny_model: Qwen2, tied embeddings, MLP 4h, q/k/v biases, two norms per layer and a final one
    params = vocab * h + layers * (16 * h * h + 5 * h) + h
    return ModelShape(float(params), vocab, h, layers)


def ref_dtype_of(cfg: DictConfig, ref_dtype: str | None = None) -> str | None:
    """The reference/teacher's dtype, or None when the run has no reference model (no KL loss, no teacher)."""
    if not cfg.method.get("teacher") and not bool(cfg.grpo.use_kl_loss):
        return None
    return ref_dtype or reference_dtype(cfg)


def logits_gb(micro_batch: int, tokens: int, vocab: int) -> float:
    """bf16 logits of one micro-batch at full length."""
    return micro_batch * tokens * vocab * 2 / GB


def gpu_phases(cfg: DictConfig, shape: ModelShape, ref_dtype: str | None) -> dict[str, float]:
    """Per-device GB of the rollout, log-prob and training phases (see the module docstring)."""
    v, g = cfg.verl, cfg.grpo
    per_device = (
        shape.params / (int(v.nnodes) * int(v.n_gpus_per_node)) / GB
    )  # GB that one byte per parameter takes on a device
    actor_offload = bool(v.actor_param_offload)
    ref_bytes = DTYPE_BYTES[ref_dtype] * per_device if ref_dtype else 0.0
    ref_offload = bool(v.ref_param_offload)
    resident = OVERHEAD_GB + (0.0 if actor_offload else (MASTER_BYTES + ADAM_STATE_BYTES) * per_device)
    resident += 0.0 if ref_offload else ref_bytes
    tokens = int(g.max_prompt_length) + int(g.max_response_length)
    loaded_for_pass = max(ref_bytes if ref_offload else 0.0, MASTER_BYTES * per_device if actor_offload else 0.0)
    log_prob = logits_gb(int(g.log_prob_micro_batch_size), tokens, shape.vocab_size)
    if str(cfg.method.reward) == "self_certainty":
        chunk = int(v.self_certainty_chunk_tokens)  # 0 or less: no chunking, the whole micro-batch upcast at once
        chunk = chunk if chunk > 0 else int(g.log_prob_micro_batch_size) * tokens
        log_prob += chunk * shape.vocab_size * 4 * 2 / GB
    mb = int(g.micro_batch_size)
    train_state = (MASTER_BYTES + ADAM_STATE_BYTES + GRAD_BYTES if actor_offload else GRAD_BYTES) * per_device
    activations = mb * tokens * shape.hidden_size * shape.num_layers * 2 / GB
    return {
        "rollout": resident + float(v.gpu_memory_utilization) * float(v.get("gpu_memory_gb", DEFAULT_GPU_MEMORY_GB)),
        "log_prob": resident + loaded_for_pass + log_prob,
        "train": resident + train_state + 2 * logits_gb(mb, tokens, shape.vocab_size) + activations,
    }


def host_gb(cfg: DictConfig, shape: ModelShape, ref_dtype: str | None) -> float:
    """Pinned host memory per node: the offloaded reference/teacher and, offloaded, the actor's state."""
    per_node = shape.params / int(cfg.verl.nnodes) / GB
    total = DTYPE_BYTES[ref_dtype] * per_node if ref_dtype and bool(cfg.verl.ref_param_offload) else 0.0
    if bool(cfg.verl.actor_param_offload):
        total += (MASTER_BYTES + ADAM_STATE_BYTES + GRAD_BYTES) * per_node
    return total


def checkpoints_kept(cfg: DictConfig) -> int | None:
    """``verl.checkpoints_to_keep`` (2 when the key is absent); null keeps every save: counted from total_steps."""
    keep = cfg.verl.get("checkpoints_to_keep", DEFAULT_CHECKPOINTS_TO_KEEP)
    if keep is not None:
        return int(keep)
    total = cfg.schedule.get("total_steps")
    return None if total is None else max(1, int(total) // int(cfg.schedule.save_freq))


def disk_gb(cfg: DictConfig, shape: ModelShape, ref_dtype: str | None) -> float | None:
    """Kept checkpoints x (fp32 model shards + teacher shards + merged bf16 export) + the newest one's optimizer."""
    keep = checkpoints_kept(cfg)
    if keep is None:
        return None
    teacher = cfg.method.get("teacher")
    teacher_bytes = DTYPE_BYTES[ref_dtype] if teacher and ref_dtype else 0
    per_checkpoint = (MASTER_BYTES + teacher_bytes + HF_EXPORT_BYTES) * shape.params / GB
    return keep * per_checkpoint + ADAM_STATE_BYTES * shape.params / GB


def check_limits(cfg: DictConfig) -> None:
    """``verl.gpu_memory_gb`` must be a positive number; ``host_memory_gb`` and ``disk_gb`` too, or null."""
    for key in ("gpu_memory_gb", "host_memory_gb", "disk_gb"):
        value = cfg.verl.get(key, DEFAULT_GPU_MEMORY_GB if key == "gpu_memory_gb" else None)
        if value is None and key != "gpu_memory_gb":
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            allowed = "a number > 0" + ("" if key == "gpu_memory_gb" else " or null (not checked)")
            raise ConfigError(f"verl.{key}={value!r}: must be {allowed}")


def _problems(cfg: DictConfig, gpu: float, phase: str, host: float, disk: float | None) -> list[str]:
    v = cfg.verl
    out = []
    if gpu > float(v.get("gpu_memory_gb", DEFAULT_GPU_MEMORY_GB)):
        out.append(
            f"needs {gpu:.1f} GB of GPU memory per device (its {phase} phase), "
            f"more than verl.gpu_memory_gb={v.get('gpu_memory_gb', DEFAULT_GPU_MEMORY_GB)}"
        )
    if v.get("host_memory_gb") is not None and host > float(v.host_memory_gb):
        out.append(f"needs {host:.1f} GB of host memory per node, more than verl.host_memory_gb={v.host_memory_gb}")
    if v.get("disk_gb") is not None:
        if disk is None:
            out.append(
                f"verl.checkpoints_to_keep=null keeps every checkpoint, so disk use is unbounded; "
                f"set it (or schedule.total_steps) to check verl.disk_gb={v.disk_gb}"
            )
        elif disk > float(v.disk_gb):
            out.append(f"needs {disk:.1f} GB of checkpoint disk, more than verl.disk_gb={v.disk_gb}")
    return out


def plan_cell(cfg: DictConfig, ref_dtype: str | None = None) -> ResourcePlan:
    """The estimate for ``cfg``'s cell; ``ref_dtype`` (e.g. from the translated verl config) overrides the default."""
    check_limits(cfg)
    shape = model_shape(cfg)
    dtype = ref_dtype_of(cfg, ref_dtype)
    phases = gpu_phases(cfg, shape, dtype)
    phase = max(phases, key=lambda k: phases[k])
    host, disk = host_gb(cfg, shape, dtype), disk_gb(cfg, shape, dtype)
    return ResourcePlan(
        cell_of(cfg).cell_id, phases[phase], phase, host, disk, phases, _problems(cfg, phases[phase], phase, host, disk)
    )


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
