"""A verl-shaped CPU harness for ``CorewardingTrainer.fit``: fakes of the parts of verl 0.9.1 that need GPUs (the
agent-loop rollout manager, the actor/ref worker group, the checkpoint engine), behaving as verl does at runtime;
everything else (DataProto, RayPPOTrainer.fit and its helpers, advantage estimators, our reward managers) is real.

Runtime behaviour mirrored (paths under ``verl/``):
* ``experimental/agent_loop/agent_loop.py`` ``AgentLoopManager.generate_sequences`` (~1244): adds ``priority`` to
  the input in place; ``_postprocess`` (~1101-1135): with reward-loop workers the output carries **none** of the
  input's non-tensor columns, only ``__num_turns__``, the reward extra info, ``multi_modal_inputs`` ({} per text
  row), ``raw_prompt`` and the default extra fields; ``rm_scores`` holds each row's reward-loop score on its last
  response token; meta_info is ``{"timing", "reward_extra_keys"}``.
* ``workers/engine_workers.py`` ``TrainingWorker._postprocess_output`` (~229): ``metrics["mfu"]`` only when the
  input carries ``global_token_num``; ``infer_batch`` returns per-token outputs on the no-padding layout.
* ``trainer/ppo/ray_trainer.py`` ``_get_dp_size`` (~1162): ``_dispatch_info`` / ``_query_dispatch_info``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from omegaconf import OmegaConf
from tensordict import TensorDict
from verl import DataProto
from verl.experimental.reward_loop.reward_manager import get_reward_manager_cls as get_loop_manager
from verl.utils import tensordict_utils as tu

from corewarding.training.verl.worker import STATISTICS_KEY

MFU = 0.25


def response_text(answer: str) -> str:
    return f"so the answer is \\boxed{{{answer}}}" if answer else "no idea"


def fake_entropy(seq_len: int) -> float:
    """The fake worker's per-token entropy of a sequence of ``seq_len`` valid tokens."""
    return 1.0 / seq_len


def fake_certainty(seq_len: int) -> float:
    """The fake worker's per-token self-certainty of a sequence of ``seq_len`` valid tokens."""
    return seq_len / 10.0


FAKE_STATISTICS = {"self_certainty": fake_certainty}  # what the fake worker's probe returns per statistic


class Pending:
    """What a non-blocking worker-group call returns (an object ref in verl); ``ray.get`` resolves it."""

    def __init__(self, value: Any) -> None:
        self.value = value


def ray_get(ref: Any, *args: Any, **kwargs: Any) -> Any:
    if isinstance(ref, list):
        return [ray_get(r) for r in ref]
    return ref.value if isinstance(ref, Pending) else ref


@dataclass
class FakeWorkerGroup:
    """The actor/rollout/ref worker group: log-prob passes, actor update, checkpoint, teacher operations."""

    dp_size: int = 2
    calls: list[tuple[str, Any]] = field(default_factory=list)
    _dispatch_info: dict[str, list[int]] = field(default_factory=dict)

    def _query_dispatch_info(self, role: str) -> list[int]:
        return list(range(self.dp_size))

    def _infer(self, data: TensorDict, statistics: tuple[str, ...] = ()) -> TensorDict:
        ids = data["input_ids"]
        lens = ids.offsets().diff().tolist()
        per_token = {
            "log_probs": torch.cat([torch.full((n,), -0.5) for n in lens]),
            "entropy": torch.cat([torch.full((n,), fake_entropy(n)) for n in lens]),
        }
        for name in statistics:  # the worker's probe returns each statistic the input names, under its name
            fake = FAKE_STATISTICS[name]
            per_token[name] = torch.cat([torch.full((n,), fake(n)) for n in lens])
        metrics: dict[str, Any] = {"loss": 0.0}
        if tu.get(data, "global_token_num") is not None:  # engine_workers.py _postprocess_output
            metrics["mfu"] = MFU
        return tu.get_tensordict(tensor_dict=per_token, non_tensor_dict={"metrics": metrics})

    def compute_log_prob(self, data: TensorDict) -> TensorDict:
        self.calls.append(("compute_log_prob", len(data)))
        return self._infer(data)

    def compute_ref_log_prob(self, data: TensorDict) -> TensorDict:
        self.calls.append(("compute_ref_log_prob", len(data)))
        return self._infer(data)

    def corewarding_log_prob_with_stats(self, data: TensorDict) -> TensorDict:
        self.calls.append(("corewarding_log_prob_with_stats", len(data)))
        return self._infer(data, tuple(str(tu.get(data, STATISTICS_KEY)).split(",")))

    def update_actor(self, data: TensorDict) -> TensorDict:
        adv = data["advantages"]
        values = adv.values() if adv.is_nested else adv
        seen = {k: tu.get(data, k) for k in ("uid", "reward_model", "extra_info")}
        seen.update({k: data[k].clone() for k in ("responses", "response_mask", "token_level_rewards")})
        seen.update(advantages=values.clone(), seq_lens=data["input_ids"].offsets().diff().tolist(), rows=len(data))
        self.calls.append(("update_actor", seen))
        metrics = {"pg_loss": [0.0], "mfu": MFU, "lr": 1e-4, "grad_norm": 0.0}
        return tu.get_tensordict(tensor_dict={}, non_tensor_dict={"metrics": metrics})

    def save_checkpoint(self, local_path: str, hdfs_path: str | None = None, global_step: int = 0, **kw: Any) -> None:
        self.calls.append(("save_checkpoint", {"path": local_path, "step": global_step}))

    def corewarding_rotate_checkpoints(self, checkpoints_dir: str, keep: int | None) -> int:
        self.calls.append(("corewarding_rotate_checkpoints", {"dir": checkpoints_dir, "keep": keep}))
        return 0

    def corewarding_ema_update(self, rate: float) -> int:
        self.calls.append(("corewarding_ema_update", rate))
        return 1

    def corewarding_teacher_to_rollout(self, global_steps: int | None = None) -> Pending:
        self.calls.append(("corewarding_teacher_to_rollout", global_steps))
        return Pending(None)

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]


@dataclass
class FakeCheckpointManager:
    """verl.checkpoint_engine.CheckpointEngineManager: weight sync into and sleep of the rollout replicas."""

    calls: list[tuple[str, Any]] = field(default_factory=list)

    def update_weights(self, global_steps: int | None = None) -> None:
        self.calls.append(("update_weights", global_steps))

    def sleep_replicas(self) -> None:
        self.calls.append(("sleep_replicas", None))


class FakeRolloutManager:
    """verl's AgentLoopManager with reward-loop workers: scripted answers, scored by the real reward-loop manager.

    ``script(call, row, j)`` gives the answer of the j-th sample (within its interleaved group) of a prompt in the
    ``call``-th generate call; ``row`` holds the input row's non-tensor columns.
    """

    def __init__(self, tokenizer: Any, prompt_length: int, response_length: int, script: Any) -> None:
        self.tokenizer = tokenizer
        self.prompt_length, self.response_length = prompt_length, response_length
        self.script = script
        self.calls: list[DataProto] = []
        self.loop_manager = get_loop_manager("corewarding_gt")(
            config=OmegaConf.create({}), tokenizer=tokenizer, compute_score=None
        )

    def _pad(self, ids: list[int], width: int, left: bool) -> tuple[list[int], list[int]]:
        ids = ids[-width:] if left else ids[:width]
        pad = [self.tokenizer.pad_token_id] * (width - len(ids))
        mask = [0] * len(pad)
        return (pad + ids, mask + [1] * len(ids)) if left else (ids + pad, [1] * len(ids) + mask)

    def generate_sequences(self, prompts: DataProto) -> DataProto:
        if "priority" not in prompts.non_tensor_batch:  # agent_loop.py ~1244, in place
            prompts.non_tensor_batch["priority"] = np.arange(len(prompts), dtype=np.int64)
        call = len(self.calls)
        self.calls.append(prompts)
        eos = self.tokenizer.eos_token_id
        rows: dict[str, list[Any]] = {k: [] for k in ("p", "pm", "r", "rm")}
        scores, accs, seen = [], [], {}
        for i in range(len(prompts)):
            key = str(prompts.non_tensor_batch["raw_prompt"][i])
            j = seen[key] = seen.get(key, -1) + 1
            row = {k: v[i] for k, v in prompts.non_tensor_batch.items()}
            text = response_text(self.script(call, row, j))
            prompt_ids = self.tokenizer(key, add_special_tokens=False)["input_ids"]
            resp_ids = [*self.tokenizer(text, add_special_tokens=False)["input_ids"], eos]
            p, pm = self._pad(prompt_ids, self.prompt_length, left=True)
            r, rm = self._pad(resp_ids, self.response_length, left=False)
            for k, v in zip(("p", "pm", "r", "rm"), (p, pm, r, rm), strict=True):
                rows[k].append(v)
            one = DataProto(
                batch=TensorDict({"responses": torch.tensor([r]), "response_mask": torch.tensor([rm])}, batch_size=1),
                non_tensor_batch={"reward_model": np.asarray([prompts.non_tensor_batch["reward_model"][i]])},
            )
            result = self.loop_manager.loop.run_until_complete(self.loop_manager.run_single(one))
            scores.append(result["reward_score"])
            accs.append(result["reward_extra_info"]["acc"])
        prompt, response = torch.tensor(rows["p"]), torch.tensor(rows["r"])
        attention = torch.cat([torch.tensor(rows["pm"]), torch.tensor(rows["rm"])], dim=1)
        response_mask = torch.tensor(rows["rm"])
        rm_scores = torch.zeros(response_mask.shape, dtype=torch.float32)
        rm_scores[torch.arange(len(scores)), response_mask.sum(-1) - 1] = torch.tensor(scores)
        n = len(prompts)
        batch = TensorDict(
            {
                "prompts": prompt,
                "responses": response,
                "response_mask": response_mask,
                "input_ids": torch.cat([prompt, response], dim=1),
                "attention_mask": attention,
                "position_ids": (attention.cumsum(-1) - 1).clamp(min=0),
                "rm_scores": rm_scores,
            },
            batch_size=n,
        )
        objects = np.empty(n, dtype=object)
        objects[:] = [{} for _ in range(n)]
        non_tensor = {
            "__num_turns__": np.full(n, 2, dtype=np.int32),
            "acc": np.asarray(accs),
            "multi_modal_inputs": objects,
            "raw_prompt": prompts.non_tensor_batch["raw_prompt"].copy(),
        }
        for key in ("turn_scores", "tool_rewards", "min_global_steps", "max_global_steps", "extras"):
            non_tensor[key] = np.empty(n, dtype=object)
        return DataProto(
            batch=batch,
            non_tensor_batch=non_tensor,
            meta_info={"timing": {"agent_loop/generate_sequences/mean": 0.0}, "reward_extra_keys": ["acc"]},
        )
