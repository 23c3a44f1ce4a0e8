"""The one-device GRPO backend on the tiny model: every method trains, parameters move, a killed run resumes exactly.

The tiny model gets a 300-step supervised warm start (built once per session, ~8 s) so it writes \\boxed answers and
text rewards and votes are exercised, not only zeros.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from corewarding.config import compose_config
from corewarding.training.local.trainer import LocalTrainer, train
from corewarding.training.verl.metrics import FROM_HOOK, FROM_VERL

METHODS = [
    "gt_grpo", "majority_voting", "self_certainty", "entropy", "co_rewarding_1", "co_rewarding_2", "co_rewarding_3",
    "co_rewarding_2_frozen_teacher", "majority_voting_rephrased",
]  # fmt: skip
WITH_TEACHER = ("co_rewarding_2", "co_rewarding_2_frozen_teacher", "co_rewarding_3")
PER_VIEW_LOSSES = {
    f"{m}_{t}" for m in ("pg_loss", "kl_mean", "clipfrac", "ppo_kl", "entropy_mean") for t in ("ori", "aug")
}  # fmt: skip
PER_VIEW_LABELS = {
    f"{t}_{m}" for m in ("pseudo_nonempty_rate", "pseudo_acc", "pseudo_pass_rate", "policypseudo_acc")
    for t in ("ori", "aug")
}  # fmt: skip
SECTION_10_METRICS = {
    "reward_mean", "label_accuracy", "nonempty_label_rate", "vote_agreement", "response_length_mean",
    "truncation_rate", "entropy_mean", "kl_mean", "lr", "ema_rate", "grad_norm", "pg_loss",
}  # fmt: skip


def tiny_overrides(method: str, artifacts: Path, runs: Path, *extra: str) -> list[str]:
    return [
        "experiment=tiny_cpu", f"method={method}", f"paths.artifacts_dir={artifacts}", f"paths.runs_dir={runs}",
        "base_model.tiny.sft_steps=300", "schedule.total_steps=2", "schedule.val_max_samples=4", *extra,
    ]  # fmt: skip


def test_one_step_changes_the_parameters(artifacts_dir: Path, tmp_path: Path) -> None:
    cfg = compose_config(tiny_overrides("entropy", artifacts_dir, tmp_path, "optimizer.weight_decay=0.0"))
    trainer = LocalTrainer(cfg, tmp_path / "run", progress=False)
    before = {k: v.clone() for k, v in trainer.policy.state_dict().items()}
    metrics = trainer.train_step(1)
    after = trainer.policy.state_dict()
    changed = [k for k in before if not torch.equal(before[k], after[k])]
    assert len(changed) >= len(before) // 2, f"only {changed} changed"
    assert metrics["grad_norm"] > 0 and metrics["lr"] == cfg.optimizer.lr
    # the reference model stays where it started
    ref = trainer.ref.state_dict()
    assert all(torch.equal(before[k], ref[k]) for k in before)


@pytest.mark.parametrize("method", METHODS)
def test_every_method_trains_two_steps(method: str, artifacts_dir: Path, tmp_path: Path) -> None:
    cfg = compose_config(tiny_overrides(method, artifacts_dir, tmp_path))
    result = train(cfg, progress=False)
    assert result.run_dir == tmp_path / f"{cfg.method.name}__tiny__tiny"
    steps = [m for m in result.metrics if m["step"] > 0]
    assert [m["step"] for m in result.metrics] == [0, 1, 2]
    assert set(steps[0]) >= SECTION_10_METRICS
    # every name logged here has a verl source in the exporter (ppo_kl_{ori,aug} had none; docs/training.md)
    assert set(steps[0]) - {"step", "ema_rate", "val_accuracy", *FROM_VERL, *FROM_HOOK} == set()
    assert "val_accuracy" in result.metrics[0] and "val_accuracy" in steps[-1]
    for m in steps:
        assert 0.0 <= m["truncation_rate"] <= 1.0 and m["response_length_mean"] > 0
        assert m["entropy_mean"] > 0
    if method not in ("self_certainty", "entropy"):  # the warm-started model boxes answers: votes are non-empty
        assert max(m["nonempty_label_rate"] for m in steps) > 0
        assert any(m["reward_mean"] > 0 for m in steps) or method == "co_rewarding_2_frozen_teacher"
    if method in ("co_rewarding_2", "co_rewarding_3"):
        assert steps[0]["ema_rate"] == pytest.approx(0.01)
    else:
        assert all(m["ema_rate"] is None for m in steps)
    two_views = method in ("co_rewarding_1", "co_rewarding_3")
    assert (set(steps[0]) & PER_VIEW_LOSSES) == (PER_VIEW_LOSSES if two_views else set())
    assert (set(steps[0]) & PER_VIEW_LABELS) == (PER_VIEW_LABELS if method == "co_rewarding_3" else set())
    if two_views:  # the step's losses are the objective's: the sum of the views' token-means (as verl logs them)
        for name in ("pg_loss", "kl_mean"):
            assert steps[0][name] == pytest.approx(steps[0][f"{name}_ori"] + steps[0][f"{name}_aug"])
        assert all(abs(steps[0][f"ppo_kl_{t}"]) < 1e-3 for t in ("ori", "aug"))  # one update: old == current policy
    checkpoint = result.run_dir / "checkpoints" / "global_step_2"
    assert (checkpoint / "model" / "model.safetensors").is_file() and (checkpoint / "trainer.safetensors").is_file()
    assert (checkpoint / "teacher.safetensors").is_file() == (method in WITH_TEACHER)
    assert (result.run_dir / "config.yaml").read_text().count(f"name: {method}") == 1
    assert json.loads((result.run_dir / "inputs.json").read_text())["dropped"] == {"prompt_too_long": 0}
    written = [json.loads(x) for x in (result.run_dir / "metrics.jsonl").read_text().splitlines()]
    assert written == result.metrics


def test_co_rewarding_2_teacher_moves_only_when_the_ema_is_on(artifacts_dir: Path, tmp_path: Path) -> None:
    moved = {}
    for method in ("co_rewarding_2", "co_rewarding_2_frozen_teacher"):
        cfg = compose_config(tiny_overrides(method, artifacts_dir, tmp_path, "method.teacher.ema.alpha_start=0.5"))
        trainer = LocalTrainer(cfg, tmp_path / method, progress=False)
        before = {k: v.clone() for k, v in trainer.teacher.state_dict().items()}
        # the policy moves at step 1; the teacher follows at step 2, before it generates
        trainer.train_step(1)
        trainer.train_step(2)
        after = trainer.teacher.state_dict()
        moved[method] = sum(float((after[k] - before[k]).abs().sum()) for k in before)
        assert trainer.teacher.dtype == torch.float32 and trainer.ref is trainer.teacher
    assert moved["co_rewarding_2"] > 0 and moved["co_rewarding_2_frozen_teacher"] == 0


def test_co_rewarding_3_teacher_samples_both_views_after_its_ema_update(artifacts_dir: Path, tmp_path: Path) -> None:
    cfg = compose_config(tiny_overrides("co_rewarding_3", artifacts_dir, tmp_path))
    trainer = LocalTrainer(cfg, tmp_path / "run", progress=False)
    assert trainer.ref is trainer.teacher and trainer.teacher.dtype == torch.float32  # the KL anchor is the teacher
    batches, rate = trainer._rollouts(1)
    assert list(batches) == ["original", "rephrased", "teacher_original", "teacher_rephrased"] and rate == 0.01
    for view in ("original", "rephrased"):  # the teacher answers the same prompts as the policy, n times each
        teacher = batches[f"teacher_{view}"]
        assert torch.equal(teacher.prompt_ids, batches[view].prompt_ids) and teacher.uids == batches[view].uids
    assert not torch.equal(batches["original"].prompt_ids, batches["rephrased"].prompt_ids)


def _comparable(metrics: list[dict]) -> list[dict]:
    return [{k: v for k, v in m.items() if k != "step_seconds"} for m in metrics]


@pytest.mark.parametrize("method", ["co_rewarding_2", "co_rewarding_1", "co_rewarding_3"])
def test_killed_run_resumes_with_identical_metrics(method: str, artifacts_dir: Path, tmp_path: Path) -> None:
    extra = ("schedule.total_steps=5", "schedule.save_freq=2", "grpo.max_response_length=40")
    killed = tiny_overrides(method, artifacts_dir, tmp_path / "killed", *extra)
    compose_config(killed)  # fail fast on a bad override before starting a process
    run_dir = tmp_path / "killed" / f"{method}__tiny__tiny"
    cmd = [sys.executable, "-m", "corewarding.cli", "train", *killed]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={**os.environ})
    latest = run_dir / "checkpoints" / "latest"
    deadline = time.monotonic() + 120
    while not latest.is_file():  # killed right after its first checkpoint (step 2; step 4 under heavy load)
        assert proc.poll() is None, f"run ended before it was killed: {proc.stderr.read().decode()[-2000:]}"
        assert time.monotonic() < deadline, "no checkpoint within 120 s"
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    resumed = train(compose_config(killed), progress=False)
    straight = train(
        compose_config(tiny_overrides(method, artifacts_dir, tmp_path / "straight", *extra)), progress=False
    )

    assert [m["step"] for m in resumed.metrics] == [0, 1, 2, 3, 4, 5]
    assert _comparable(resumed.metrics) == _comparable(straight.metrics)
    final = "checkpoints/global_step_5/model/model.safetensors"
    assert (resumed.run_dir / final).read_bytes() == (straight.run_dir / final).read_bytes()
    if method in WITH_TEACHER:  # the teacher is saved and restored too, so it ends where an unbroken run's does
        teacher = "checkpoints/global_step_5/teacher.safetensors"
        assert (resumed.run_dir / teacher).read_bytes() == (straight.run_dir / teacher).read_bytes()


def test_resume_under_another_config_is_refused(artifacts_dir: Path, tmp_path: Path) -> None:
    from corewarding.config import ConfigError

    train(compose_config(tiny_overrides("majority_voting", artifacts_dir, tmp_path)), progress=False)
    changed = compose_config(tiny_overrides("majority_voting", artifacts_dir, tmp_path, "grpo.kl_coef=0.5"))
    with pytest.raises(ConfigError, match="checkpoints of another configuration"):
        LocalTrainer(changed, tmp_path / "majority_voting__tiny__tiny", progress=False)


def test_a_non_fp32_teacher_is_refused(artifacts_dir: Path, tmp_path: Path) -> None:
    """A bf16 teacher's EMA rounds away at the late rates (tests/unit/test_teacher_dtype.py): refused at once."""
    from corewarding.config import ConfigError

    with pytest.raises(ConfigError, match=r"method\.teacher\.dtype='bfloat16': must be float32"):
        compose_config(tiny_overrides("co_rewarding_2", artifacts_dir, tmp_path, "method.teacher.dtype=bfloat16"))


def test_rollouts_ignore_the_models_own_sampling_settings(artifacts_dir: Path) -> None:
    from corewarding.lm.loading import load_base_model
    from corewarding.lm.rollout import Sampling, chat_prompts, generate
    from corewarding.tiny.model import build_tiny_model

    cfg = compose_config(tiny_overrides("gt_grpo", artifacts_dir, artifacts_dir))
    build_tiny_model(Path(cfg.base_model.path), **dict(cfg.base_model.tiny))
    model, tokenizer = load_base_model(cfg)
    prompts = chat_prompts(tokenizer, [[{"role": "user", "content": "What is 3 + 4?"}]])
    outputs = []
    for penalty in (1.0, 50.0):  # a model config that would reshape the distribution must not leak in
        model.generation_config.repetition_penalty = penalty
        model.generation_config.no_repeat_ngram_size = 0 if penalty == 1.0 else 1
        torch.manual_seed(0)
        outputs.append(generate(model, tokenizer, prompts, ["u"], ["7"], Sampling(4, 16)).response_ids)
    assert torch.equal(outputs[0], outputs[1])


def test_overlong_prompts_are_dropped_pairwise_and_reported(artifacts_dir: Path, tmp_path: Path) -> None:
    # tiny originals are 35-39 tokens and rephrasings 46-54: a 50-token limit drops the pairs whose rephrasing is long
    cfg = compose_config(tiny_overrides("co_rewarding_1", artifacts_dir, tmp_path, "grpo.max_prompt_length=50"))
    trainer = LocalTrainer(cfg, tmp_path / "run", progress=False)
    report = json.loads((tmp_path / "run" / "inputs.json").read_text())
    dropped = report["dropped"]["prompt_too_long"]
    assert 0 < dropped < 64
    assert report["train_rows"] == report["rephrased_rows"] == 64 - dropped == len(trainer.rows.train)
    assert len(trainer.rows.rephrased) == len(trainer.rows.train)
    # Counted with the cell's own base-model tokenizer (the prepared files are shared by every base model).
    assert report["prompt_filter"] == {"tokenizer": cfg.base_model.path, "max_prompt_length": 50}


def test_a_run_does_not_depend_on_whether_the_tiny_model_was_already_built(tmp_path: Path) -> None:
    """Building the model in-process draws random numbers; the run is seeded after loading, so both agree."""
    artifacts = tmp_path / "artifacts"
    overrides = ["base_model.tiny.sft_steps=20", "schedule.val_max_samples=2"]
    built_here = train(compose_config(tiny_overrides("gt_grpo", artifacts, tmp_path / "a", *overrides)), progress=False)
    cached = train(compose_config(tiny_overrides("gt_grpo", artifacts, tmp_path / "b", *overrides)), progress=False)
    assert built_here.metrics and [m.get("reward_mean") for m in built_here.metrics] == [
        m.get("reward_mean") for m in cached.metrics
    ]
    assert [m.get("response_length_mean") for m in built_here.metrics] == [
        m.get("response_length_mean") for m in cached.metrics
    ]
