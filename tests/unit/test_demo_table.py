"""The pipeline's final table says what its numbers are: each reward's unit, validation accuracy from step 0 (the
base model) to the last step, the evaluation's interval, the attempt as a number, and, for tiny cells, that the run
is a plumbing check."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from corewarding.pipeline.run_summary import CellReport, PipelineReport, format_report, reward_unit
from corewarding.run_folder import EVAL_METRICS


def _run_folder(root: Path, cell_id: str, rewards: list[float]) -> Path:
    run = root / cell_id
    (run / "eval").mkdir(parents=True)
    lines = [{"step": 0, "val_accuracy": 0.125}]
    lines += [{"step": i + 1, "reward_mean": r, "label_accuracy": 0.5, "response_length_mean": 9.0}
              for i, r in enumerate(rewards)]  # fmt: skip
    lines[-1]["val_accuracy"] = 0.25  # validated after the last step
    (run / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    rows = [{"step": len(rewards), "benchmark": "tiny", "checker": "math_verify", "metric": "avg@4", "value": 0.1875,
             "ci_low": 0.0625, "ci_high": 0.3125}]  # fmt: skip
    pd.DataFrame(rows).to_parquet(run / EVAL_METRICS)
    return run


def _cell(run: Path, attempt: str) -> CellReport:
    cell = CellReport(run.name, str(run), attempt=attempt)
    cell.steps = {"train": "done", "evaluate": "done", "ingest": "done", "publish": "done"}
    return cell


def test_the_table_names_units_the_step_0_baseline_intervals_and_attempt_numbers(tmp_path: Path) -> None:
    gt = _run_folder(tmp_path, "gt_grpo__tiny__tiny", [0.25, 0.75])
    sc = _run_folder(tmp_path, "self_certainty__tiny__tiny", [13.0, 14.0])
    table = format_report(PipelineReport("demo", [_cell(gt, gt.name), _cell(sc, f"{sc.name}#2")]))
    rows = {line.split()[0]: line.split() for line in table.splitlines() if "__tiny__tiny" in line}
    assert rows["gt_grpo__tiny__tiny"][5:9] == ["0.500", "0/1", "0.500", "0.125->0.250"]
    assert rows["self_certainty__tiny__tiny"][5:7] == ["13.500", "nats"]
    for row in rows.values():  # the headline with its 95% interval
        assert " ".join(row[9:16]) == "tiny avg@4 @2 = 0.188 [0.062, 0.312]"
    assert rows["gt_grpo__tiny__tiny"][-2] == "1" and rows["self_certainty__tiny__tiny"][-2] == "2"
    alone = format_report(PipelineReport("demo", [_cell(gt, gt.name)]))  # one attempt, in this process: no columns
    assert "attempt" not in alone.splitlines()[0] and alone.splitlines()[2].split()[-1] == "0.312]"
    assert "A plumbing check, not a result" in table


def test_reward_units_follow_the_method() -> None:
    units = {m: reward_unit(f"{m}__tiny__tiny") for m in ("gt_grpo", "co_rewarding_2", "self_certainty", "entropy")}
    assert units == {"gt_grpo": "0/1", "co_rewarding_2": "0/1", "self_certainty": "nats", "entropy": "-nats"}
    assert reward_unit("not-a-cell") == "?"
