"""``CorewardingTrainer.fit`` driven end to end on CPU for two steps of every method, with the GPU parts of verl
replaced by the runtime-faithful fakes of ``harness.py`` (teacher rollouts come back without non-tensor columns,
``mfu`` only with ``global_token_num``, verl's real ``_balance_batch`` reordering over two DP ranks). Everything
else is real: the composed tiny config, verl's fit loop, reward extraction, GRPO advantages, our managers."""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path
from typing import Any

import pytest
import ray
import torch
from omegaconf import OmegaConf, open_dict
from transformers import PreTrainedTokenizerBase

from corewarding import methods
from corewarding.checkpoint_manifest import MANIFEST, manifest_problem
from corewarding.training.verl.metrics import next_attempt_file
from tests.unit.verl.harness import MFU, FakeCheckpointManager, FakeRolloutManager, FakeWorkerGroup, ray_get
from tests.unit.verl.test_trainer import build_trainer

POLICY = {"original": ["{t}", "{t}", "wrong", ""], "rephrased": ["wrong", "wrong", "{t}", ""]}
TEACHER = ["wrong", "wrong", "wrong", "{t}"]  # the teacher votes 'wrong': Co-rewarding-II rewards the policy's 3rd
# Co-rewarding-III's teacher on the original prompts votes the ground truth (and 'wrong' on the rephrased ones), so
# the original rows follow 'wrong' and the rephrased rows the ground truth: the cross-view pairing shows
TEACHER_ON_ORIGINAL = ["{t}", "{t}", "wrong", "{t}"]


def _view(row: dict[str, Any]) -> str:
    extra = row.get("extra_info")
    return str(extra.get("cr_view", "original")) if isinstance(extra, dict) else "original"


def run_fit(
    method: str,
    artifacts_dir: Path,
    tmp_path: Path,
    tokenizer: PreTrainedTokenizerBase,
    monkeypatch: Any,
    steps: int = 2,
    settings: dict[str, Any] | None = None,
):
    """``fit()`` for ``steps`` steps; ``settings`` are verl config keys (dotted) set before it starts."""
    trainer, _ = build_trainer(method, artifacts_dir, tmp_path, tokenizer)
    with open_dict(trainer.config):
        trainer.config.trainer.val_before_train = False
        trainer.config.trainer.test_freq = -1
        trainer.config.trainer.save_freq = 2
        trainer.config.trainer.resume_mode = "disable"
        trainer.config.corewarding.reward_dump = True
        for key, value in (settings or {}).items():
            OmegaConf.update(trainer.config, key, value, merge=False)
    trainer.total_training_steps = steps
    wg = FakeWorkerGroup(dp_size=2)
    trainer.actor_rollout_wg = trainer.ref_policy_wg = wg
    teacher = methods.get(method).needs_teacher

    def scripted(call: int, row: dict[str, Any], j: int) -> str:
        if teacher and call % 2 == 1:
            answers = TEACHER_ON_ORIGINAL if method == "co_rewarding_3" and _view(row) == "original" else TEACHER
        else:
            answers = POLICY[_view(row)]
        return answers[j % 4].format(t=row["reward_model"]["ground_truth"])

    rollout = trainer.config.actor_rollout_ref.rollout
    manager = FakeRolloutManager(tokenizer, int(rollout.prompt_length), int(rollout.response_length), scripted)
    trainer.async_rollout_manager = manager
    trainer.checkpoint_manager = FakeCheckpointManager()
    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(next_attempt_file(trainer.cr.verl_log_dir)))  # as runner.py
    monkeypatch.setattr(ray, "get", ray_get)  # the teacher's non-blocking worker call returns a harness Pending
    trainer.fit()
    return trainer, wg, manager


def expected_rewards(method: str, update: dict[str, Any], tokenizer: PreTrainedTokenizerBase) -> list[float]:
    texts = tokenizer.batch_decode(
        [r[m.bool()] for r, m in zip(update["responses"], update["response_mask"], strict=True)],
        skip_special_tokens=True,
    )
    answers = [(re.findall(r"\\boxed\{(.*)\}", t) or [""])[0] for t in texts]
    truths = [rm["ground_truth"] for rm in update["reward_model"]]
    views = [_view({"extra_info": e}) for e in update["extra_info"]]
    if method in ("gt_grpo", "majority_voting"):  # the group's vote is the ground truth here
        return [float(a == t) for a, t in zip(answers, truths, strict=True)]
    if method == "co_rewarding_2":  # label: the teacher's majority ('wrong')
        return [float(a == "wrong") for a in answers]
    if method == "co_rewarding_3":  # original rows: the teacher's vote on the rephrasing ('wrong'); rephrased rows:
        # its vote on the original (the ground truth)
        return [float(a == ("wrong" if v == "original" else t)) for a, t, v in zip(answers, truths, views, strict=True)]
    if method == "co_rewarding_1":  # original rows follow the rephrased vote ('wrong'), rephrased rows the original's
        return [float(a == ("wrong" if v == "original" else t)) for a, t, v in zip(answers, truths, views, strict=True)]
    n = update["seq_lens"]
    if method == "entropy":  # -(mean token entropy); the fake entropy is 1/len on every token
        return [-1.0 / x for x in n]
    assert method == "self_certainty"  # mean token self-certainty; the fake value is len/10
    return [x / 10.0 for x in n]


def grpo(rewards: torch.Tensor, uids: list[str]) -> torch.Tensor:
    out = torch.empty_like(rewards)
    for uid in set(uids):
        idx = torch.tensor([i for i, u in enumerate(uids) if u == uid])
        group = rewards[idx]
        out[idx] = (group - group.mean()) / (group.std() + 1e-6)
    return out


@pytest.mark.parametrize("method", methods.names())
def test_fit_runs_two_full_steps_of_every_method(
    method: str, artifacts_dir: Path, tmp_path: Path, tokenizer: PreTrainedTokenizerBase, monkeypatch: Any
) -> None:
    trainer, wg, manager = run_fit(method, artifacts_dir, tmp_path, tokenizer, monkeypatch)
    teacher = methods.get(method).needs_teacher
    assert len(manager.calls) == (4 if teacher else 2)
    policy_calls = manager.calls[::2] if teacher else manager.calls
    updates = [c for n, c in wg.calls if n == "update_actor"]
    assert [u["rows"] for u in updates] == [len(c) for c in policy_calls]
    assert len(policy_calls[0]) == trainer.config.data.train_batch_size * trainer.config.actor_rollout_ref.rollout.n
    for update in updates:
        rewards = update["token_level_rewards"].sum(-1)
        torch.testing.assert_close(rewards, torch.tensor(expected_rewards(method, update, tokenizer)))
        adv = update["advantages"]
        mask = update["response_mask"].bool()
        assert torch.isfinite(adv).all() and (adv[~mask] == 0).all()
        per_row = adv[torch.arange(len(adv)), mask.sum(-1) - 1]
        torch.testing.assert_close(per_row, grpo(rewards, [str(u) for u in update["uid"]]), atol=1e-4, rtol=1e-4)
        assert per_row.abs().sum() > 0
    gens = 2 if teacher else 1  # each generate call is followed by a sleep; weights sync at start and per step
    step = [("sleep_replicas", None)] * gens
    assert trainer.checkpoint_manager.calls == [
        ("update_weights", 0),
        *step,
        ("update_weights", 1),
        *step,
        ("update_weights", 2),
    ]
    saves = [c for n, c in wg.calls if n == "save_checkpoint"]
    assert [s["step"] for s in saves] == [2] and saves[0]["path"].endswith("global_step_2/actor")
    after_save = wg.names()[wg.names().index("save_checkpoint") + 1]  # then the rotation verl leaves undone
    rotations = [c for n, c in wg.calls if n == "corewarding_rotate_checkpoints"]
    assert after_save == "corewarding_rotate_checkpoints" and rotations == [
        {"dir": trainer.config.trainer.default_local_dir, "keep": trainer.config.trainer.max_actor_ckpt_to_keep}
    ]
    step_folder = Path(trainer.config.trainer.default_local_dir) / "global_step_2"  # the manifest, after the save
    assert manifest_problem(step_folder) is None and "data.pt" in (step_folder / MANIFEST).read_text()
    dumps = sorted((Path(trainer.cr.run_dir) / "verl_rewards").glob("step_*.jsonl"))  # verl.reward_dump
    assert [p.name for p in dumps] == ["step_0001.jsonl", "step_0002.jsonl"]
    for i, (path, update) in enumerate(zip(dumps, updates, strict=True)):
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        trained = sorted(r["reward"] for r in rows if r["rewarded"])
        assert trained == pytest.approx(sorted(update["token_level_rewards"].sum(-1).tolist()), abs=1e-5)
        assert len(rows) == len(policy_calls[i]) + (len(manager.calls[2 * i + 1]) if teacher else 0)
    exported = [json.loads(x) for x in Path(trainer.cr.metrics_file).read_text().splitlines()]  # our schema
    assert [m["step"] for m in exported] == [1, 2]
    for m, update in zip(exported, updates, strict=True):
        assert m["reward_mean"] == pytest.approx(update["token_level_rewards"].sum(-1).mean().item(), abs=1e-5)
        assert m["lr"] > 0 and m["pg_loss"] == 0.0 and (m["ema_rate"] is not None) == teacher
        two_views = method in ("co_rewarding_1", "co_rewarding_3")
        assert ({"entropy_mean_ori", "entropy_mean_aug"} <= set(m)) == two_views  # each view's, from verl's pass
        if method == "co_rewarding_3":  # the teacher's labels: 'wrong' on the original rows, right on the rephrased
            assert (m["ori_pseudo_acc"], m["aug_pseudo_acc"], m["ori_pseudo_nonempty_rate"]) == (0.0, 1.0, 1.0)
    logged = [json.loads(x)["data"] for x in Path(os.environ["VERL_FILE_LOGGER_PATH"]).read_text().splitlines()]
    for data in logged:  # verl's own step metrics, as fit() logged them
        for key in (
            "critic/advantages/mean",
            "critic/score/mean",
            "global_seqlen/mean",
            "perf/mfu/actor",
            "timing_s/gen",
        ):
            assert key in data, key
        assert data["perf/mfu/actor_infer"] == MFU  # the log-prob pass ran with global_token_num
    passes = wg.names().count("compute_log_prob") + wg.names().count("corewarding_log_prob_with_stats")
    assert passes == 2  # one old-log-prob pass per step: verl's own call gets the reward step's cached pass
    assert wg.names().count("corewarding_log_prob_with_stats") == (2 if method == "self_certainty" else 0)
    if teacher:
        teacher_in = manager.calls[1]
        assert list(teacher_in.non_tensor_batch["raw_prompt"]) == list(manager.calls[0].non_tensor_batch["raw_prompt"])
        assert wg.names().count("corewarding_teacher_to_rollout") == 2
        rates = [c for n, c in wg.calls if n == "corewarding_ema_update"]
        assert rates == [m["ema_rate"] for m in exported] and rates[0] > rates[1] > 0  # cosine decay over 2 steps


def cosine_rate(step: int, total: int, start: float, end: float) -> float:
    """methods.md 1.2, written out here (not the project's ``ema_rate``): a_k = a_end + (a_start - a_end)
    (1 + cos(pi t / K)) / 2 with t = clip(k - 1, 0, K)."""
    t = min(max(step - 1, 0), total)
    return end + (start - end) * (1 + math.cos(math.pi * t / total)) / 2


@pytest.mark.parametrize("method", ["co_rewarding_2", "co_rewarding_3"])
def test_the_teacher_moves_by_the_cosine_schedule_at_every_step(
    method: str, artifacts_dir: Path, tmp_path: Path, tokenizer: PreTrainedTokenizerBase, monkeypatch: Any
) -> None:
    """An asymmetric schedule that moves every step (0.7 -> 0.3 over K = 3): the rate sent to the workers and the
    logged ``ema_rate`` are a_k at step k, and each step's EMA runs before that step's teacher rollouts. A constant
    or symmetric schedule would hide a wrong step index, a wrong K or a reversed rate."""
    ema = "corewarding.method.teacher.ema"
    settings = {f"{ema}.alpha_start": 0.7, f"{ema}.alpha_end": 0.3, f"{ema}.update_interval": 1}
    trainer, wg, _ = run_fit(method, artifacts_dir, tmp_path, tokenizer, monkeypatch, steps=3, settings=settings)
    expected = [cosine_rate(k, 3, 0.7, 0.3) for k in (1, 2, 3)]
    assert expected == pytest.approx([0.7, 0.6, 0.4])  # the schedule the test expects, by hand
    rates = [c for n, c in wg.calls if n == "corewarding_ema_update"]
    assert rates == pytest.approx(expected, rel=0, abs=1e-12), "the rate sent to the workers' EMA"
    exported = [json.loads(x) for x in Path(trainer.cr.metrics_file).read_text().splitlines()]
    assert [m["step"] for m in exported] == [1, 2, 3]
    assert [m["ema_rate"] for m in exported] == pytest.approx(expected, rel=0, abs=1e-12), "the logged ema_rate"
    teacher_calls = [n for n in wg.names() if n in ("corewarding_ema_update", "corewarding_teacher_to_rollout")]
    assert teacher_calls == ["corewarding_ema_update", "corewarding_teacher_to_rollout"] * 3
