"""verl's file-tracker lines become metrics.jsonl rows in the local backend's format; a resumed attempt replaces
the steps it redoes, and a torn last line of a killed attempt is skipped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from verl.utils.py_functional import rename_dict
from verl.workers.utils.losses import ppo_loss

from corewarding.training.local.losses import StepLossMetrics
from corewarding.training.verl.metrics import ORDER, export_metrics, next_attempt_file
from tests.unit.verl.test_view_loss import ADVANTAGES, SHIFT, _batch, _config, _engine_metrics

LOSS_KEYS = ("actor/pg_loss", "actor/kl_loss", "actor/pg_clipfrac")  # verl's own; the per-view run replaces them


def step_record(step: int, reward: float, val: float | None = None, ema: float | None = None) -> dict:
    data = {
        "training/global_step": step, "training/epoch": 0, "actor/pg_loss": -0.1 * step, "actor/kl_loss": 0.01,
        "actor/pg_clipfrac": 0.0, "actor/grad_norm": 1.5, "actor/lr": 3e-6, "actor/entropy": 0.7,
        "response_length/mean": 120.0, "response_length/clip_ratio": 0.25, "timing_s/step": 9.5,
        "corewarding/reward_mean": reward, "corewarding/label_accuracy": 0.5,
        "corewarding/nonempty_label_rate": 1.0, "corewarding/vote_agreement": 0.75,
        "corewarding/missing_ground_truth": 0, "critic/score/mean": reward,
    }  # fmt: skip
    if ema is not None:
        data["corewarding/ema_rate"] = ema
    if val is not None:
        data["val-core/DigitalLearningGmbH/MATH-lighteval/acc/mean@1"] = val
    return {"step": step, "data": data}


def val_record(step: int, val: float) -> dict:
    return {"step": step, "data": {"val-core/DigitalLearningGmbH/MATH-lighteval/acc/mean@1": val}}


def write(path: Path, records: list[dict], torn: bool = False) -> None:
    text = "".join(json.dumps(r) + "\n" for r in records)
    path.write_text(text + ('{"step": 9, "da' if torn else ""))


def test_steps_map_to_our_keys(tmp_path: Path) -> None:
    logs = tmp_path / "verl_logs"
    write(next_attempt_file(logs), [val_record(0, 0.1), step_record(1, 0.5, ema=0.01), step_record(2, 0.75, 0.2)])
    assert export_metrics(logs, tmp_path / "metrics.jsonl") == 3
    rows = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert rows[0] == {"step": 0, "val_accuracy": 0.1}
    assert rows[1] == {
        "step": 1, "epoch": 0, "reward_mean": 0.5, "label_accuracy": 0.5, "nonempty_label_rate": 1.0,
        "vote_agreement": 0.75, "missing_ground_truth": 0, "response_length_mean": 120.0, "truncation_rate": 0.25,
        "entropy_mean": 0.7, "kl_mean": 0.01, "pg_loss": -0.1, "clipfrac": 0.0, "grad_norm": 1.5, "lr": 3e-6,
        "ema_rate": 0.01, "step_seconds": 9.5,
    }  # fmt: skip
    assert list(rows[1]) == [k for k in ORDER if k in rows[1]]
    assert rows[2]["ema_rate"] is None and rows[2]["val_accuracy"] == 0.2  # no teacher update: null, as locally


def test_a_resumed_attempt_replaces_the_steps_it_redoes(tmp_path: Path) -> None:
    logs = tmp_path / "verl_logs"
    # attempt 1 checkpointed at step 2, got to step 4, was killed mid-write
    write(next_attempt_file(logs), [val_record(0, 0.1), *[step_record(s, 0.1 * s) for s in (1, 2, 3, 4)]], torn=True)
    # attempt 2 resumed from step 2: validation of the checkpoint, then steps 3 and 4 again
    write(next_attempt_file(logs), [val_record(2, 0.3), step_record(3, 0.9), step_record(4, 0.95)])
    assert sorted(p.name for p in logs.iterdir()) == ["attempt-001.jsonl", "attempt-002.jsonl"]
    export_metrics(logs, tmp_path / "metrics.jsonl")
    rows = {r["step"]: r for r in map(json.loads, (tmp_path / "metrics.jsonl").read_text().splitlines())}
    assert sorted(rows) == [0, 1, 2, 3, 4]
    assert rows[2]["reward_mean"] == pytest.approx(0.2) and rows[2]["val_accuracy"] == 0.3
    assert (rows[3]["reward_mean"], rows[4]["reward_mean"]) == (0.9, 0.95)


def test_a_step_saved_but_never_logged_is_reported_not_filled_in(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """verl logs a step after saving it: killed in between, attempt 1 has step 1 only, and the resume (from the step-2
    save) starts at step 3. The export keeps what exists and names the missing step, once."""
    logs = tmp_path / "verl_logs"
    write(next_attempt_file(logs), [step_record(1, 0.1)])
    write(next_attempt_file(logs), [step_record(3, 0.3), step_record(4, 0.4)])
    with caplog.at_level("WARNING", logger="corewarding.training.verl.metrics"):
        assert export_metrics(logs, tmp_path / "metrics.jsonl") == 3
        export_metrics(logs, tmp_path / "metrics.jsonl")
    rows = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 3, 4]
    warnings = [r.getMessage() for r in caplog.records if "no metrics for step" in r.getMessage()]
    assert len(warnings) == 1 and "step(s) 2:" in warnings[0] and "metrics.jsonl" in warnings[0]


def test_a_corrupt_line_before_the_end_is_an_error_naming_it(tmp_path: Path) -> None:
    logs = tmp_path / "verl_logs"
    next_attempt_file(logs).write_text('{"step": 1, "data": {}}\nnot json\n{"step": 2, "data": {}}\n')
    with pytest.raises(ValueError, match=r"attempt-001.jsonl:2: not JSON"):
        export_metrics(logs, tmp_path / "metrics.jsonl")
    assert not (tmp_path / "metrics.jsonl").exists()


def _exported_step(tmp_path: Path, actor: dict[str, float], extra: dict[str, float]) -> dict:
    """The exported row of one verl step whose actor metrics are ``actor`` (as the trainer logs them)."""
    data = {k: v for k, v in step_record(1, 0.5)["data"].items() if k not in LOSS_KEYS}
    record = {"step": 1, "data": {**data, **rename_dict(actor, "actor/"), **extra}}
    write(next_attempt_file(tmp_path / "verl_logs"), [record])
    export_metrics(tmp_path / "verl_logs", tmp_path / "metrics.jsonl")
    return json.loads((tmp_path / "metrics.jsonl").read_text())


@pytest.mark.parametrize("views", [("original",), ("original", "rephrased")])
def test_the_loss_metrics_carry_the_local_backends_names(views: tuple[str, ...], tmp_path: Path) -> None:
    """The loss and entropy names of a step: verl's (from verl's own ppo_loss, or for two views the per-view sum,
    reduced as verl's engine reduces them) through the exporter equal the local backend's, one view and two."""
    local = StepLossMetrics(n_micro=1)
    for view in views:
        local.add(view, 0.1, 0.01, {"clipfrac": 0.0, "ppo_kl": 0.0, "tokens": 1.0})
    local.end_micro_batch()
    local_names = set(local.result()) | {"entropy_mean"}
    if len(views) == 2:
        actor = _engine_metrics(n_ranks=1, micro=1)
        row = _exported_step(tmp_path, actor, {"actor/entropy_ori": 0.5, "actor/entropy_aug": 0.25})
        local_names |= {"entropy_mean_ori", "entropy_mean_aug"}
    else:
        data, rows = _batch(SHIFT, ADVANTAGES)
        _, metrics = ppo_loss(_config(), {"log_probs": torch.cat(rows)}, data)
        actor = {k: float(v.aggregate()) if hasattr(v, "aggregate") else v for k, v in metrics.items()}
        row = _exported_step(tmp_path, actor, {})
    names = {k for k in row if k.startswith(("pg_loss", "kl_mean", "clipfrac", "ppo_kl", "entropy_mean"))}
    assert names == local_names
    if len(views) == 2:  # the aggregates are the sums of the views' terms; ppo_kl is each view's, by hand
        assert row["pg_loss"] == pytest.approx(row["pg_loss_ori"] + row["pg_loss_aug"])
        assert row["kl_mean"] == pytest.approx(row["kl_mean_ori"] + row["kl_mean_aug"])
        assert row["ppo_kl_ori"] == pytest.approx((2 * -0.4 + 5 * 0.1) / 7, abs=1e-6)
        assert row["ppo_kl_aug"] == pytest.approx((1 * -0.3 + 3 * -0.1) / 4, abs=1e-6)
        assert list(row) == [k for k in ORDER if k in row]


def test_each_views_ppo_kl_is_exported(tmp_path: Path) -> None:
    """methods.md 1.7's per-view ``actor/ppo_kl_{ori,aug}`` become ``ppo_kl_{ori,aug}`` (they were dropped)."""
    per_view = {f"actor/ppo_kl_{t}": v for t, v in (("ori", 0.0125), ("aug", -0.003))}
    row = _exported_step(tmp_path, {"pg_loss": -0.1, "kl_loss": 0.01, "pg_clipfrac": 0.0, **per_view}, {})
    assert (row["ppo_kl_ori"], row["ppo_kl_aug"]) == (0.0125, -0.003)


def test_verls_system_figures_are_kept_under_their_names(tmp_path: Path) -> None:
    """The run page's system metrics: verl's throughput, step time and peak GPU memory pass through as logged."""
    logs = tmp_path / "verl_logs"
    record = step_record(1, 0.5)
    record["data"] |= {"perf/throughput": 812.5, "perf/time_per_step": 9.4, "perf/max_memory_allocated_gb": 61.2,
                       "perf/max_memory_reserved_gb": 70.0, "perf/cpu_memory_used_gb": 120.0}  # fmt: skip
    write(next_attempt_file(logs), [record])
    export_metrics(logs, tmp_path / "metrics.jsonl")
    (row,) = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    kept = {k: v for k, v in row.items() if k.startswith("perf/")}
    assert kept == {"perf/throughput": 812.5, "perf/time_per_step": 9.4, "perf/max_memory_allocated_gb": 61.2,
                    "perf/max_memory_reserved_gb": 70.0}  # fmt: skip
