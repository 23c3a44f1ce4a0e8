"""verl 0.9.1's own trainer, end to end on CPU, for every method (``make verl-e2e``; docs/gpu-harness.md).

Per method, through ``corewarding train backend=verl verl.platform=cpu``: verl's agent loop with vLLM's CPU engine
(two replicas), FSDP2 on gloo with two ranks, our plug-ins (worker, trainer, reward managers); no verl class or
method is replaced by a fake. A save every step; once step 2 is saved the first launch is killed with SIGKILL (driver,
Ray workers and vLLM processes, as a crashed node), a second launch resumes and finishes step 4. Then:

* the run's metric names are the local backend's for the same method (one meaning per name);
* the resumed run continued from the save (steps 1-4 once each) and some step had a non-zero gradient;
* Co-rewarding-II/III: the EMA rate moves every step (0.7 -> 0.3 over the run's K steps) and the logged ``ema_rate``
  is the cosine schedule computed here at every step; on both ranks, the teacher saved at every step k >= 2 is the
  EMA of the teacher and the policy saved at step k - 1, at a_k; for the first step of the resumed launch those are
  the saves from before the kill (so the resume restored both, and the EMA ran on the real FSDP2 shards);
* Majority-Voting, Co-rewarding-I, II and III: every trained row's reward is recomputed from ``verl.reward_dump``'s
  rows with a vote counted here (``collections.Counter``), by the method's rule (methods.md): the row's own group
  (Majority-Voting), the other view's policy rows (I), the teacher on the same prompt (II), the teacher on the other
  view (III); Co-rewarding-III: at every step the teacher's rows of each view answer that view's prompt;
* Co-rewarding-I: the loss is the sum of the two views' token-means, as logged per view by the real engine;
* every socket the run's processes listen on is on loopback.

``VERL_E2E_METHODS=a,b`` runs a subset (CI runs at least Co-rewarding-II, Co-rewarding-III and Self-Certainty).
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import signal
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

import pytest
import torch

from corewarding.checkpoint_manifest import MANIFEST
from corewarding.training.verl.metrics import SYSTEM_FROM_VERL
from corewarding.training.verl.teacher import shard_fingerprint
from tests.support import verl_oracle as oracle
from tests.support.verl_e2e import SFT_STEPS, TAG_ENV, ListenWatch, kill_run, wait_for

ALL_METHODS = (
    "gt_grpo",
    "majority_voting",
    "self_certainty",
    "entropy",
    "co_rewarding_1",
    "co_rewarding_2",
    "co_rewarding_3",
)
METHODS = tuple(m for m in os.environ.get("VERL_E2E_METHODS", ",".join(ALL_METHODS)).split(",") if m)
TEACHER_METHODS = ("co_rewarding_2", "co_rewarding_3")
LAUNCH_TIMEOUT_S = 1500  # a hang guard (a launch takes 1-3 minutes on 2 cores)
TRACKER = "latest_checkpointed_iteration.txt"
TOTAL_STEPS = 4
KILL_FROM_STEP = 2  # the first launch is killed once a save of step 2 or later is complete (before the last step)
# the teacher's EMA rate: asymmetric (at 0.5, rate and 1 - rate give the same teacher) and moving every step (a
# constant rate hides a wrong step index, K or cosine); K = TOTAL_STEPS (trainer.total_training_steps)
ALPHA_START, ALPHA_END = 0.7, 0.3


def overrides(method: str, run_dir: Path, artifacts: Path, ray_address: str) -> list[str]:
    # the teacher methods: a large EMA rate and learning rate, so one step moves the teacher far more than float
    # rounding (at the script's rates, 1e-2 to 1e-5 of a 1e-4 step, a skipped EMA would pass for a done one)
    teacher = [
        f"method.teacher.ema.alpha_start={ALPHA_START}",
        f"method.teacher.ema.alpha_end={ALPHA_END}",
        "method.teacher.ema.update_interval=1",
        "optimizer.lr=1e-3",
        # vLLM's log-prob of each sampled token, dumped per row: the check that the teacher's rows come from its weights
        "verl.overrides=['actor_rollout_ref.rollout.calculate_log_probs=true']",
    ]
    return [
        *(teacher if method in TEACHER_METHODS else []),
        "backend=verl",
        "experiment=tiny_cpu",
        "base_model=tiny-qwen3",
        f"base_model.tiny.sft_steps={SFT_STEPS}",
        f"method={method}",
        "verl.platform=cpu",
        "verl.n_gpus_per_node=2",
        f"verl.ray_address={ray_address}",
        f"schedule.total_steps={TOTAL_STEPS}",
        "schedule.save_freq=1",
        "verl.checkpoints_to_keep=null",  # every save stays, so the step before the resume can be read back
        "verl.reward_dump=true",  # verl_rewards/step_N.jsonl: what the manager scored, for the label checks
        "schedule.test_freq=100",
        "schedule.val_before_train=false",
        "grpo.micro_batch_size=4",
        "grpo.log_prob_micro_batch_size=4",
        "torch_threads=null",
        f"paths.runs_dir={run_dir.parent}",
        f"paths.artifacts_dir={artifacts}",
    ]


def launch(args: list[str], run_dir: Path, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    cmd = [str(Path(sys.executable).parent / "corewarding"), "train", "--run-dir", str(run_dir), *args]
    with log.open("ab") as out:
        return subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def saved_step(run_dir: Path) -> int:
    """The newest complete save: verl recorded it and the trainer wrote its manifest (``resume.py``), 0 if none."""
    try:
        recorded = int((run_dir / "checkpoints" / TRACKER).read_text().strip())
    except (OSError, ValueError):
        return 0
    complete = [
        s for s in range(1, recorded + 1) if (run_dir / "checkpoints" / f"global_step_{s}" / MANIFEST).is_file()
    ]
    return max(complete, default=0)


def metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]


def local_metric_names(method: str, tmp: Path, env: dict[str, str]) -> set[str]:
    """The metric names the local backend logs for ``method`` (two tiny steps, the same tiny experiment)."""
    cmd = [
        str(Path(sys.executable).parent / "corewarding"), "train", "--run-dir", str(tmp / "local"),
        "experiment=tiny_cpu", f"method={method}", "schedule.total_steps=2", "schedule.save_freq=2",
        "schedule.test_freq=2", f"paths.artifacts_dir={tmp / 'artifacts-local'}",
    ]  # fmt: skip
    subprocess.run(cmd, env=env, check=True, capture_output=True, timeout=600)
    return {k for row in metrics(tmp / "local") for k in row}


def dumped_steps(run_dir: Path) -> list[list[dict]]:
    steps = sorted((run_dir / "verl_rewards").glob("step_*.jsonl"))
    assert len(steps) == TOTAL_STEPS, steps  # written in the reward step, before the save: the kill loses none
    return [[json.loads(line) for line in path.read_text().splitlines()] for path in steps]


def assert_teacher_rows_join_the_policy_groups(run_dir: Path) -> None:
    """Co-rewarding-II/III, every step: each teacher row votes in a group of the policy's, on that group's prompt of
    its view, and some label is non-empty (rows that lost their uid would each vote alone: every label empty)."""
    labelled = 0
    for rows in dumped_steps(run_dir):
        policy = {(r["group"], r["view"]): r["prompt"] for r in rows if not r["view"].startswith("teacher")}
        for r in (r for r in rows if r["view"].startswith("teacher")):
            view = r["view"].removeprefix("teacher").lstrip("_") or "original"
            assert (r["group"], view) in policy, f"teacher row in group {r['group']!r}, which no policy row has"
            assert r["prompt"] == policy[(r["group"], view)], f"{r['group']}: the teacher answered another prompt"
        labelled += sum(r["reward"] > 0 for r in rows if r["rewarded"])
    assert labelled > 0, "no policy row matched a teacher label in any step"


def cosine_rate(step: int) -> float:
    """methods.md 1.2, written out here: a_k = a_end + (a_start - a_end)(1 + cos(pi t / K)) / 2 with
    t = clip(k - 1, 0, K)."""
    t = min(max(step - 1, 0), TOTAL_STEPS)
    return ALPHA_END + (ALPHA_START - ALPHA_END) * (1 + math.cos(math.pi * t / TOTAL_STEPS)) / 2


def assert_ema_rates_follow_the_schedule(rows: list[dict]) -> None:
    """The logged ``ema_rate`` of every logged step is a_k; the schedule moves every step, so a wrong step index, K or
    cosine shows."""
    expected = [cosine_rate(k) for k in range(1, TOTAL_STEPS + 1)]
    assert all(a > b for a, b in itertools.pairwise(expected)), expected
    for r in rows:
        assert r["ema_rate"] == pytest.approx(cosine_rate(r["step"]), rel=0, abs=1e-9), (
            f"step {r['step']}: logged ema_rate {r['ema_rate']}, the schedule's {cosine_rate(r['step'])}"
        )


# methods.md 1.1, 1.2, 1.4, 1.7: the view whose answers (same vote group) vote the label of each rewarded view
LABELLED_BY = {
    "majority_voting": {"original": "original"},
    "co_rewarding_1": {"original": "rephrased", "rephrased": "original"},
    "co_rewarding_2": {"original": "teacher"},
    "co_rewarding_3": {"original": "teacher_rephrased", "rephrased": "teacher_original"},
}
# the likeliest wrong rule of each (a row's own view; II: the policy's own vote): the rows whose reward it would
# change are counted, to show how much of the rule the run's rollouts could tell apart
WRONG_RULE = {
    "co_rewarding_1": {"original": "original", "rephrased": "rephrased"},
    "co_rewarding_2": {"original": "original"},
    "co_rewarding_3": {"original": "teacher_original", "rephrased": "teacher_rephrased"},
}


def majority(answers: list[str]) -> str | None:
    """methods.md 2 (vote.canonicalize=exact, the default): the most common answer, blank answers dropped, a tie to
    the answer seen first (``most_common`` keeps insertion order); None when no answer is left."""
    votes = Counter(a for a in answers if a.strip())
    return votes.most_common(1)[0][0] if votes else None


def assert_rewards_follow_the_vote(method: str, run_dir: Path) -> dict[str, int]:
    """Every step: each trained row's reward is 1 iff its answer equals the majority of the answers of its vote
    group on the view that labels it (``LABELLED_BY``), that majority non-empty; only the rewarded views are trained.
    The dump's rows are in the manager's order, so ties break as they did there. Returns counts: trained rows, those
    with a non-empty label, those rewarded 1, and those whose reward ``WRONG_RULE`` would have changed."""
    rule, wrong = LABELLED_BY[method], WRONG_RULE.get(method)
    counts = {"trained": 0, "labelled": 0, "rewarded": 0, "wrong_rule_differs": 0}
    for number, rows in enumerate(dumped_steps(run_dir), 1):
        answers: dict[tuple[str, str], list[str]] = defaultdict(list)
        for r in rows:
            answers[(r["group"], r["view"])].append(r["answer"])
        for i, r in enumerate(rows):
            assert r["rewarded"] == (r["view"] in rule), f"step {number} row {i}: view {r['view']} rewarded?"
            if not r["rewarded"]:
                continue
            label = majority(answers[(r["group"], rule[r["view"]])])
            expected = float(label is not None and r["answer"] == label)
            assert r["reward"] == expected, (
                f"step {number} row {i} ({r['view']}, group {r['group']}): reward {r['reward']}, answer "
                f"{r['answer']!r}, label {label!r} from its {rule[r['view']]} voters"
            )
            counts["trained"] += 1
            counts["labelled"] += label is not None
            counts["rewarded"] += expected == 1.0
            if wrong is not None:
                other = majority(answers[(r["group"], wrong[r["view"]])])
                counts["wrong_rule_differs"] += float(other is not None and r["answer"] == other) != expected
    assert counts["labelled"] > 0, f"{method}: no trained row had a non-empty label in any step"
    return counts


def assert_each_views_teacher_answers_its_prompt(run_dir: Path) -> None:
    """Co-rewarding-III, every step: the teacher rows tagged with a view answer that view's prompt, the policy's
    rows of a view likewise, and the two views' prompts differ."""
    for number, rows in enumerate(dumped_steps(run_dir), 1):
        prompts: dict[tuple[str, str], set[str]] = {}
        for r in rows:
            view = r["view"].removeprefix("teacher_")
            prompts.setdefault((r["group"], view), set()).add(r["prompt"])
        for (group, view), texts in prompts.items():
            assert len(texts) == 1, f"dump {number} {group} {view}: the policy and the teacher saw different prompts"
            other = "rephrased" if view == "original" else "original"
            assert texts != prompts[(group, other)], f"dump {number} {group}: both views have the same prompt"
        policy = [i for i, r in enumerate(rows) if r["rewarded"]]
        assert {rows[i]["view"] for i in policy} == {"original", "rephrased"}


def shards(path: Path) -> dict[str, torch.Tensor]:
    """A rank's saved tensors, as local shards (verl's FSDP2 actor files hold DTensors)."""
    state = torch.load(path, map_location="cpu", weights_only=False)
    return {k: (v.to_local() if hasattr(v, "to_local") else v).float() for k, v in state.items()}


RESUMED = re.compile(r"rank (\d) resumed from (\S+): policy ([0-9a-f]{16})(?:, teacher ([0-9a-f]{16}))?")


def assert_resumed_what_was_saved(run_dir: Path, text: str, step: int, teacher: bool) -> None:
    """On both ranks, the shards the resumed launch holds right after loading (the fingerprint its worker logs) are
    those the killed launch saved at ``step``: policy and, for II/III, teacher."""
    found = {int(m[1]): m for m in RESUMED.finditer(text)}
    assert sorted(found) == [0, 1], f"expected a 'resumed from' line per rank, found ranks {sorted(found)}"
    ckpt = run_dir / "checkpoints" / f"global_step_{step}"
    for rank, line in found.items():
        assert Path(line[2]) == ckpt / "actor", f"rank {rank} resumed from {line[2]}"
        saved = torch.load(
            ckpt / "actor" / f"model_world_size_2_rank_{rank}.pt", map_location="cpu", weights_only=False
        )
        assert line[3] == shard_fingerprint(saved), f"rank {rank}: the loaded policy is not the step-{step} save"
        if teacher:
            saved = shards(ckpt / "teacher" / f"rank_{rank}.pt")
            assert line[4] == shard_fingerprint(saved), f"rank {rank}: the loaded teacher is not the step-{step} save"
        else:
            assert line[4] is None


def assert_teacher_is_ema(run_dir: Path, step: int, rate: float) -> float:
    """On every rank: teacher(step) == (1 - rate) teacher(step - 1) + rate policy(step - 1), from the saved files.

    Returns how far the teacher moved (the largest change of any parameter), the check's power at this step.
    """
    ckpt = run_dir / "checkpoints"
    moved = 0.0
    for rank in range(2):
        before = shards(ckpt / f"global_step_{step - 1}" / "teacher" / f"rank_{rank}.pt")
        after = shards(ckpt / f"global_step_{step}" / "teacher" / f"rank_{rank}.pt")
        policy = shards(ckpt / f"global_step_{step - 1}" / "actor" / f"model_world_size_2_rank_{rank}.pt")
        assert after.keys() == before.keys() and after.keys() <= policy.keys(), f"rank {rank}: parameter names"
        for name, teacher in after.items():
            expected = (1 - rate) * before[name] + rate * policy[name]
            assert torch.allclose(teacher, expected, rtol=0, atol=1e-6), (
                f"rank {rank} {name}: teacher after step {step} is not the EMA of the step-{step - 1} saves "
                f"(max diff {(teacher - expected).abs().max():.3g})"
            )
            moved = max(moved, float((teacher - before[name]).abs().max()))
    return moved


LOGITS_REWARDS = {"self_certainty": oracle.self_certainty_reward, "entropy": oracle.negative_entropy_reward}
TEMPERATURE = 1.0  # configs/config.yaml grpo.temperature: the statistic reads the temperature-scaled logits
# the verl run computes its log-prob pass under bf16 autocast; the recomputation is fp32 (measured: see the docs)
STATISTIC_TOLERANCE = 0.05


def actor_state(run_dir: Path, step: int) -> dict[str, torch.Tensor]:
    folder = run_dir / "checkpoints" / f"global_step_{step}" / "actor"
    return oracle.full_state([folder / f"model_world_size_2_rank_{rank}.pt" for rank in range(2)])


def assert_rewards_are_the_policys_statistic(method: str, run_dir: Path, artifacts: Path) -> str:
    """Self-Certainty, Entropy, every step: each row's reward is the statistic of the policy's own logits (methods.md
    1.5, 1.6) recomputed here from the dumped tokens, the policy being the base model at step 1 and the save of step
    k - 1 at step k (the old policy of the reward step)."""
    hf_config = run_dir / "checkpoints" / "global_step_1" / "actor" / "huggingface"
    worst = 0.0
    for number, rows in enumerate(dumped_steps(run_dir), 1):
        state = None if number == 1 else actor_state(run_dir, number - 1)
        model = oracle.model_with(artifacts / f"tiny-qwen3-sft{SFT_STEPS}" if state is None else hf_config, state)
        scored = [r for r in rows if r["rewarded"] and r["response_ids"]]
        assert scored, f"dump {number}: no row with a response"
        for r in scored:
            logits = oracle.response_logits(model, r["prompt_ids"], r["response_ids"])
            expected = LOGITS_REWARDS[method](logits, TEMPERATURE)
            worst = max(worst, abs(r["reward"] - expected))
            assert r["reward"] == pytest.approx(expected, abs=STATISTIC_TOLERANCE), f"dump {number}: {r['response']!r}"
    return f"largest difference {worst:.4f} over {TOTAL_STEPS} steps"


def assert_teacher_rows_sampled_with_the_teachers_weights(run_dir: Path) -> str:
    """Co-rewarding-II/III, steps 2 on (at step 1 the teacher still equals the policy): vLLM's log-probs of each
    teacher row's sampled tokens are those the step's saved teacher gives them, and not those of the policy that
    step started from (the actor saved at the step before): the rows were sampled with the teacher's weights.

    A step after one whose groups all scored alike starts from a teacher equal to its actor (weight decay alone moved
    the policy), so no step on its own can be asked to tell them apart: at every step the teacher explains the rows at
    least as well as the actor, and at one step or more ten times better."""
    ckpt = run_dir / "checkpoints"
    config = ckpt / "global_step_1" / "actor" / "huggingface"
    figures = []
    told_apart = False
    for number, rows in enumerate(dumped_steps(run_dir), 1):
        if number == 1:
            continue
        teacher_rows = [r for r in rows if r["view"].startswith("teacher") and r["response_ids"]]
        assert teacher_rows and all("rollout_log_probs" in r for r in teacher_rows), f"dump {number}"
        teacher = oracle.model_with(
            config, oracle.full_state([ckpt / f"global_step_{number}" / "teacher" / f"rank_{r}.pt" for r in range(2)])
        )
        actor = oracle.model_with(config, actor_state(run_dir, number - 1))
        to_teacher, to_actor = [], []
        for r in teacher_rows:
            sampled = torch.tensor(r["rollout_log_probs"])
            for model, out in ((teacher, to_teacher), (actor, to_actor)):
                logits = oracle.response_logits(model, r["prompt_ids"], r["response_ids"])
                out.append(oracle.mean_abs(sampled, oracle.token_log_probs(logits, r["response_ids"])))
        d_teacher, d_actor = sum(to_teacher) / len(to_teacher), sum(to_actor) / len(to_actor)
        figures.append(f"step {number}: {d_teacher:.2e} to the teacher, {d_actor:.2e} to the actor")
        assert d_teacher < 5e-3, f"dump {number}: the teacher's rows are not the saved teacher's samples ({d_teacher})"
        assert d_teacher <= 1.05 * d_actor, f"dump {number}: the actor explains the rows better ({figures[-1]})"
        told_apart = told_apart or d_actor > 10 * d_teacher
    assert told_apart, f"no step told the teacher's samples from the actor's: {'; '.join(figures)}"
    return "; ".join(figures)


@pytest.mark.slow
@pytest.mark.timeout(2 * LAUNCH_TIMEOUT_S + 600)  # two launches and a local run; each wait has its own guard
@pytest.mark.parametrize("method", METHODS)
def test_two_steps_save_kill_resume_one_more(
    method: str,
    tmp_path: Path,
    e2e_env: dict[str, str],
    ray_head: str,
    listen_watch: ListenWatch,
    tiny_qwen3: Path,
) -> None:
    run_dir = tmp_path / "runs" / method
    args = overrides(method, run_dir, tiny_qwen3, ray_head)
    log = tmp_path / "train.log"

    first = launch(args, run_dir, e2e_env, log)
    try:
        wait_for(
            lambda: saved_step(run_dir) >= KILL_FROM_STEP or first.poll() is not None,
            LAUNCH_TIMEOUT_S,
            f"the step-{KILL_FROM_STEP} save",
        )
    finally:
        killed = kill_run(e2e_env[TAG_ENV], first.pid) if first.poll() is None else 0
        first.wait(timeout=60)
    ended = log.read_text()[-4000:]
    assert first.returncode == -signal.SIGKILL, f"the first launch ended before it was killed: {ended}"
    assert killed > 0, "no Ray worker or vLLM process of the launch was found to kill"
    killed_at = saved_step(run_dir)  # 2 unless this process was starved for a whole step; the checks follow it
    assert KILL_FROM_STEP <= killed_at < TOTAL_STEPS, f"killed after the save of step {killed_at}"

    second = launch(args, run_dir, e2e_env, log)
    try:
        rc = second.wait(timeout=LAUNCH_TIMEOUT_S)
    finally:
        if second.poll() is None:
            kill_run(e2e_env[TAG_ENV], second.pid)
    text = log.read_text()
    assert rc == 0, f"the resumed launch failed (rc {rc}): {text[-6000:]}"
    assert saved_step(run_dir) == TOTAL_STEPS
    assert f"Setting global step to {killed_at}" in text, f"the second launch did not resume from step {killed_at}"
    step_folder = run_dir.resolve() / "checkpoints" / f"global_step_{killed_at}"
    assert f"resuming from {step_folder} (its manifest checked)" in text  # resume.py chose it, not verl's tracker
    assert_resumed_what_was_saved(run_dir, text, killed_at, method in TEACHER_METHODS)

    rows = metrics(run_dir)
    steps = [r["step"] for r in rows]
    # verl logs a step after saving it: killed in between, the saved step has no row, and the export says so
    missing = sorted(set(range(1, TOTAL_STEPS + 1)) - set(steps))
    assert steps == sorted(set(steps)) and missing in ([], [killed_at]), steps
    if missing:
        assert f"no metrics for step(s) {killed_at}:" in text
    assert any(r.get("grad_norm", 0) > 0 for r in rows), "no step changed the policy"
    names = {k for r in rows for k in r} - {"val_accuracy"} - set(SYSTEM_FROM_VERL)  # verl's own system figures
    local = local_metric_names(method, tmp_path, e2e_env) - {"val_accuracy"}
    assert names == local, f"verl only: {sorted(names - local)}; local only: {sorted(local - names)}"

    if method in TEACHER_METHODS:
        assert_teacher_rows_join_the_policy_groups(run_dir)
        assert_ema_rates_follow_the_schedule(rows)
        # every saved step's teacher is the EMA of the step before's saves at the schedule's rate; the first step
        # after the resume (killed_at + 1) reads what the resume restored
        moved = {step: assert_teacher_is_ema(run_dir, step, cosine_rate(step)) for step in range(2, TOTAL_STEPS + 1)}
        # a step whose groups all scored alike moves the policy by weight decay only (~1e-5 at lr 1e-3), and the
        # teacher with it; the policy-teacher gap a real step opens persists (the teacher closes only part of it), so
        # one moving step gives every later check its power
        assert max(moved.values()) > 1e-4, f"the teacher moved by {moved} only: the check cannot tell an EMA from none"
    if method in LABELLED_BY:
        counts = assert_rewards_follow_the_vote(method, run_dir)
        print(f"{method}: reward oracle {counts}")  # shown with -s; how much the run could tell rules apart
    if method == "co_rewarding_3":
        assert_each_views_teacher_answers_its_prompt(run_dir)
    if method in TEACHER_METHODS:
        sampled = assert_teacher_rows_sampled_with_the_teachers_weights(run_dir)
        print(f"{method}: teacher rows' sampled log-probs {sampled}")  # shown with -s
    if method in LOGITS_REWARDS:
        statistic = assert_rewards_are_the_policys_statistic(method, run_dir, tiny_qwen3)
        print(f"{method}: reward vs recomputed statistic: {statistic}")
    if method == "co_rewarding_1":
        for r in rows:
            assert r["pg_loss"] == pytest.approx(r["pg_loss_ori"] + r["pg_loss_aug"], rel=1e-5, abs=1e-9)
            assert r["kl_mean"] == pytest.approx(r["kl_mean_ori"] + r["kl_mean_aug"], rel=1e-5, abs=1e-9)

    listen_watch.sample()
    assert listen_watch.seen, "no listening socket of the run was seen: the watch is not looking"
    assert not listen_watch.outside(), listen_watch.outside()
