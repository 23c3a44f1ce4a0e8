"""A run's saved steps are evaluated once per checkpoint signature and benchmark settings (``eval/pipeline.json``)."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

import pytest

from corewarding.evaluation.run_eval import RunEvaluation, evaluate_run
from corewarding.files import write_parquet_atomic
from corewarding.lm.generation import Completion, SamplingSettings
from corewarding.rows import make_row


class BoxedGenerator:
    """Answers every problem with ``\\boxed{7}`` and counts the conversations it was asked."""

    asked = 0

    def generate(
        self, conversations: Sequence[list[dict[str, str]]], sampling: SamplingSettings, seed: int
    ) -> list[list[Completion]]:
        BoxedGenerator.asked += len(conversations)
        return [[Completion("\\boxed{7}", 3, "stop")] * sampling.n for _ in conversations]

    def close(self) -> None:
        pass


def _run(tmp_path: Path) -> tuple[Path, list[str]]:
    """A run with saved local steps 2 and 5 (a transformers folder each) and a three-problem benchmark."""
    run = tmp_path / "run"
    for step in (2, 5):
        model = run / "checkpoints" / f"global_step_{step}" / "model"
        model.mkdir(parents=True)
        (model / "config.json").write_text(json.dumps({"step": step}))
    data = tmp_path / "set.parquet"
    write_parquet_atomic([make_row(f"p{i}", gold, i, "test") for i, gold in enumerate(["7", "8", "9"])], data)
    return run, [f"benchmark.data_file={data}", "benchmark.n=2", "benchmark.metrics=[pass@1]", "checkers=[strict]"]


def _evaluate(run: Path, overrides: list[str], force: bool = False) -> RunEvaluation:
    return evaluate_run(run, "math500", overrides, force, lambda cfg, path: BoxedGenerator())


def test_a_current_stamp_skips_the_run_and_a_step_saved_again_renews_it(tmp_path: Path) -> None:
    run, overrides = _run(tmp_path)
    first = _evaluate(run, overrides)
    assert first.skipped is None and first.steps == [2, 5]
    assert [(o.step, o.status) for o in first.outcomes] == [(2, "evaluated"), (5, "evaluated")]
    assert first.outcomes[0].metrics == {"pass@1/strict": pytest.approx(1 / 3)}
    stamp = json.loads((run / "eval" / "pipeline.json").read_text())
    assert list(stamp) == ["steps", "benchmarks", "settings_sha256"] and list(stamp["steps"]) == ["2", "5"]
    assert stamp["benchmarks"] == ["math500"]

    asked = BoxedGenerator.asked
    assert _evaluate(run, overrides).skipped == "every saved step evaluated"
    assert BoxedGenerator.asked == asked  # nothing generated, nothing merged or hashed

    config = run / "checkpoints" / "global_step_5" / "model" / "config.json"
    os.utime(config, ns=(config.stat().st_atime_ns, config.stat().st_mtime_ns + 10**9))  # saved again, same content
    again = _evaluate(run, overrides)
    assert again.skipped is None and [o.status for o in again.outcomes] == ["unchanged", "unchanged"]
    renewed = json.loads((run / "eval" / "pipeline.json").read_text())
    assert renewed["steps"]["2"] == stamp["steps"]["2"] and renewed["steps"]["5"] != stamp["steps"]["5"]

    forced = _evaluate(run, overrides, force=True)
    assert forced.skipped is None and {o.status for o in forced.outcomes} == {"unchanged"}
    assert _evaluate(run, [*overrides, "seed=3"]).outcomes[0].status == "evaluated"  # other settings: a new stamp


def test_a_run_without_checkpoints_is_an_error_unless_it_was_evaluated(tmp_path: Path) -> None:
    run, overrides = _run(tmp_path)
    _evaluate(run, overrides)
    for step in (2, 5):
        (run / "checkpoints" / f"global_step_{step}" / "model" / "config.json").unlink()
    assert _evaluate(run, overrides).skipped == "no checkpoint left; evaluated before"
    (run / "eval" / "pipeline.json").unlink()
    with pytest.raises(FileNotFoundError, match="no saved checkpoint to evaluate"):
        _evaluate(run, overrides)


def test_a_failed_unit_leaves_no_stamp(tmp_path: Path) -> None:
    run, overrides = _run(tmp_path)
    missing = [*overrides, f"benchmark.data_file={tmp_path / 'absent.parquet'}", "benchmark.datasource=null"]
    result = _evaluate(run, missing)
    assert [o.status for o in result.failed] == ["failed", "failed"] and result.steps == [2, 5]
    assert not (run / "eval" / "pipeline.json").exists()
