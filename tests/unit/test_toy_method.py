"""An 8th method added the documented way (docs/architecture.md, "Adding things"): a reward core registered here and
configs/method/toy_method.yaml with a demo cell, in a copy of configs/. With no other edit it passes the dry run, is
listed by ``matrix list``, trains a real tiny step on the local backend and two steps of verl's fit loop (the CPU
harness); without ``hub_name`` its YAML fails the dry run and ``matrix list`` in one line naming the file and key."""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file

from corewarding.cli import main
from corewarding.config import compose_config, config_dir
from corewarding.matrix import Cell, hub_repo_id, load_matrix
from corewarding.methods import registry
from corewarding.methods.base import Rollout, Scored, ScoreResult
from corewarding.methods.registry import MethodSpec, register
from corewarding.methods.voting import Voter

TOY = "toy_method"
TOY_YAML = f"""\
# @package _global_
# A toy method: reward 1 for the shortest response of its group (ties all get it), 0 for the others.
method:
  name: {TOY}
  hub_name: Toy-Method
  reward: {TOY}
  views: [original]
"""


def shortest_response(rollouts: Sequence[Rollout], voter: Voter | None = None) -> ScoreResult:
    """r_i = 1 when y_i is (one of) the shortest responses of its group (uid, view), else 0; no label."""
    shortest: dict[tuple[str, str], int] = {}
    for uid, view, response, _ in rollouts:
        shortest[uid, view] = min(shortest.get((uid, view), len(response)), len(response))
    return ScoreResult.from_scored(
        [Scored(i, float(len(r.response) == shortest[r.uid, r.view]), None) for i, r in enumerate(rollouts)]
    )


@pytest.fixture
def toy_configs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, list[list[Rollout]]]:
    """A copy of configs/ with the toy method's YAML and a demo cell for it, the toy registered in a copy of the
    registry (both undone after the test); returns the copy's folder and the rollouts each scoring call got."""
    configs = tmp_path / "configs"
    shutil.copytree(config_dir(), configs)
    monkeypatch.setenv("COREWARDING_CONFIG_DIR", str(configs))
    (configs / "method" / f"{TOY}.yaml").write_text(TOY_YAML)
    with (configs / "matrix" / "demo.yaml").open("a") as demo:
        demo.write(f"  - {{method: {TOY}, base_model: tiny, dataset: tiny}}\n")
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    calls: list[list[Rollout]] = []

    def score(rollouts: Sequence[Rollout], voter: Voter | None = None) -> ScoreResult:
        calls.append(list(rollouts))
        return shortest_response(rollouts, voter)

    register(MethodSpec(TOY, "text", views=("original",), rewarded_views=("original",), score=score))
    return configs, calls


def hand_rewards(rollouts: Sequence[Rollout]) -> list[float]:
    """The toy's rewards written out again: 1 where no rollout of the same question is shorter."""
    return [float(all(len(r.response) <= len(o.response) for o in rollouts if o.uid == r.uid)) for r in rollouts]


def test_the_toy_core_rewards_the_shortest_response_of_each_group() -> None:
    rows = [Rollout("a", "original", t) for t in ("xyz", "x", "xy")] + [Rollout("b", "original", t) for t in "12"]
    rows.append(Rollout("a", "rephrased", "xyzw"))  # its own group: the shortest there
    assert [s.reward for s in shortest_response(rows).scored] == [0.0, 1.0, 0.0, 1.0, 1.0, 1.0]
    assert hand_rewards(rows[:5]) == [0.0, 1.0, 0.0, 1.0, 1.0]


def test_the_toy_passes_the_dry_run_and_is_listed_with_the_demo(
    toy_configs: tuple[Path, list[list[Rollout]]], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["train", "--dry-run", f"method={TOY}"]) == 0
    assert json.loads(capsys.readouterr().out) == {"backend": "local", "dry_run": True, "config": "valid"}
    assert main(["matrix", "list", "--matrix", "demo", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert len(listed) == 9 and listed[-1]["cell_id"] == f"{TOY}__tiny__tiny"
    assert listed[-1]["hub_repo_id"] == "TMLR-Group-HF/Toy-Method-Tiny-Tiny"
    assert [e["cell_id"] for e in listed[:2]] == ["gt_grpo__tiny__tiny", "gt_grpo__tiny__tiny__seed1"]


def test_the_toy_without_hub_name_fails_in_one_line_naming_the_file_and_key(
    toy_configs: tuple[Path, list[list[Rollout]]], capsys: pytest.CaptureFixture[str]
) -> None:
    configs, _ = toy_configs
    toy_file = configs / "method" / f"{TOY}.yaml"
    toy_file.write_text(TOY_YAML.replace("  hub_name: Toy-Method\n", ""))
    line = f"error: {toy_file}: method.hub_name: missing\n"
    assert main(["train", "--dry-run", f"method={TOY}"]) == 2
    assert capsys.readouterr() == ("", line)
    assert main(["matrix", "list", "--matrix", "demo"]) == 2
    assert capsys.readouterr() == ("", line)  # nothing listed: the broken file is named first
    assert len(load_matrix("demo").cells) == 9  # readers that need only the names still read the matrix
    with pytest.raises(KeyError, match=f"{toy_file}: method.hub_name: missing"):  # ingestion: no repo id
        hub_repo_id(Cell(TOY, "tiny", "tiny"))
    toy_file.write_text(TOY_YAML.replace("views: [original]", "views: [original, rephrased]"))
    assert main(["matrix", "list", "--matrix", "demo"]) == 2
    assert capsys.readouterr().err.startswith(
        f"error: {toy_file}: method.views=['original', 'rephrased']: must be ['original'], the views of the "
        f"registered method '{TOY}'"
    )


def test_a_tiny_local_step_of_the_toy_cell_moves_the_policy_and_writes_metrics(
    toy_configs: tuple[Path, list[list[Rollout]]], artifacts_dir: Path, tmp_path: Path
) -> None:
    from corewarding.training.local.trainer import train  # torch + transformers: imported when used

    _, calls = toy_configs
    cfg = compose_config([
        "experiment=tiny_cpu", f"method={TOY}", f"paths.artifacts_dir={artifacts_dir}", f"paths.runs_dir={tmp_path}",
        "schedule.total_steps=1", "schedule.save_freq=1", "schedule.val_before_train=false",
        "schedule.val_max_samples=2", "optimizer.weight_decay=0.0",
    ])  # fmt: skip
    result = train(cfg, progress=False)
    assert result.run_dir == tmp_path / f"{TOY}__tiny__tiny" and result.steps == 1
    [rollouts] = calls  # one scoring pass: the step's 4 questions x 4 rollouts
    assert len(rollouts) == 16 and {r.view for r in rollouts} == {"original"}
    expected = hand_rewards(rollouts)
    written = [json.loads(x) for x in (result.run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in written] == [1] and written == result.metrics
    assert written[0]["reward_mean"] == pytest.approx(sum(expected) / 16)
    assert 0 < sum(expected) < 16  # some groups reward one rollout over others: the advantages are not all 0
    base = load_file(Path(cfg.base_model.path) / "model.safetensors")
    trained = load_file(result.run_dir / "checkpoints" / "global_step_1" / "model" / "model.safetensors")
    changed = [k for k in base if not torch.equal(base[k], trained[k])]
    assert len(changed) >= len(base) // 2, f"only {changed} changed"


def test_two_verl_fit_steps_of_the_toy_run_on_the_cpu_harness(
    toy_configs: tuple[Path, list[list[Rollout]]], artifacts_dir: Path, tmp_path: Path, monkeypatch: Any
) -> None:
    """verl's batch managers are made per registered method when verl loads the plug-in; the toy, registered later,
    gets its manager the same way (``registered_managers``)."""
    from transformers import AutoTokenizer  # verl, ray, transformers: imported when used
    from verl.workers.reward_manager.registry import REWARD_MANAGER_REGISTRY

    from corewarding.tiny.model import build_tiny_model
    from corewarding.training.verl.rewards import manager_name, registered_managers
    from tests.unit.verl.test_fit_harness import run_fit

    monkeypatch.setitem(REWARD_MANAGER_REGISTRY, manager_name(TOY), registered_managers()[manager_name(TOY)])
    tokenizer = AutoTokenizer.from_pretrained(build_tiny_model(artifacts_dir / "tiny-model-sft0"), padding_side="left")
    tokenizer.pad_token = tokenizer.pad_token or tokenizer.eos_token
    trainer, wg, manager = run_fit(TOY, artifacts_dir, tmp_path, tokenizer, monkeypatch)
    updates = [c for n, c in wg.calls if n == "update_actor"]
    assert len(updates) == len(manager.calls) == 2
    for update in updates:  # the harness scripts each group as [truth, truth, 'wrong', nothing]: 'no idea' is shortest
        texts = tokenizer.batch_decode(
            [r[m.bool()] for r, m in zip(update["responses"], update["response_mask"], strict=True)],
            skip_special_tokens=True,
        )
        rewards = update["token_level_rewards"].sum(-1)
        assert rewards.tolist() == [float(t.strip() == "no idea") for t in texts] and 0 < rewards.sum() < len(texts)
    exported = [json.loads(x) for x in Path(trainer.cr.metrics_file).read_text().splitlines()]
    assert [m["step"] for m in exported] == [1, 2] and all(m["reward_mean"] == pytest.approx(0.25) for m in exported)
