"""The harness's aggregation on scripted responses, checked against values computed by hand."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from corewarding.evaluation.eval_config import benchmark_configs
from corewarding.evaluation.harness import evaluate_targets
from corewarding.evaluation.targets import Target
from corewarding.files import write_parquet_atomic
from corewarding.lm.generation import Completion, SamplingSettings
from corewarding.rows import make_row

GOLDS = ["142", "\\frac{1}{2}", "7"]
RESPONSES = {
    "p0": ["so \\boxed{142}", "\\boxed{142.0}", "\\boxed{141}", "I do not know"],
    "p1": ["\\boxed{\\dfrac12}", "\\boxed{0.5}", "\\boxed{0.5}", "\\boxed{1/3}"],
    "p2": ["\\boxed{8}", "\\boxed{8}", "\\boxed{7}", "\\boxed{8}"],
}


class ScriptedGenerator:
    """Returns the scripted responses of each problem (found by its question text)."""

    def generate(
        self, conversations: Sequence[list[dict[str, str]]], sampling: SamplingSettings, seed: int
    ) -> list[list[Completion]]:
        out = []
        for messages in conversations:
            texts = RESPONSES[messages[-1]["content"]][: sampling.n]
            out.append([Completion(t, len(t.split()), "stop") for t in texts])
        return out

    def close(self) -> None:
        pass


# by hand: strict  p0 [T F F F] p1 [T T T F] p2 [F F T F];  math_verify  p0 [T T F F] p1 [T T T F] p2 [F F T F]
# pass@2 (n=4): c=1 -> 1 - C(3,2)/C(4,2) = 1/2; c=2 -> 1 - 1/6 = 5/6; c=3 -> 1
# maj@4: p0 is a four-way tie -> the first answer "142" (right); p1 -> "0.5" (right); p2 -> "8" (wrong)
EXPECTED = {
    ("strict", "avg@4"): (0.25 + 0.75 + 0.25) / 3,
    ("math_verify", "avg@4"): (0.5 + 0.75 + 0.25) / 3,
    ("strict", "pass@1"): (0.25 + 0.75 + 0.25) / 3,
    ("strict", "pass@2"): (0.5 + 1 + 0.5) / 3,
    ("math_verify", "pass@2"): (5 / 6 + 1 + 0.5) / 3,
    ("strict", "pass@4"): 1.0,
    ("math_verify", "maj@4"): 2 / 3,
    ("strict", "maj@4"): 2 / 3,
}


def test_metrics_of_scripted_answers(tmp_path: Path) -> None:
    data = tmp_path / "set.parquet"
    rows = [make_row(f"p{i}", gold, i, "test") for i, gold in enumerate(GOLDS)]
    write_parquet_atomic(rows, data)
    overrides = [f"benchmark.data_file={data}", "benchmark.n=4", "benchmark.metrics=[pass@1,avg@4,pass@2,pass@4,maj@4]"]
    configs = benchmark_configs(["math500"], overrides)
    target = Target(None, "scripted", "scripted@1")
    outcome = evaluate_targets([target], configs, tmp_path / "out", lambda cfg, path: ScriptedGenerator())
    assert outcome[0].status == "evaluated" and outcome[0].counts["samples"] == 12

    metrics = {(m["checker"], m["metric"]): m for m in pq.read_table(tmp_path / "out/eval/metrics.parquet").to_pylist()}
    for key, value in EXPECTED.items():
        assert metrics[key]["value"] == pytest.approx(value), key
        assert metrics[key]["ci_low"] <= metrics[key]["value"] <= metrics[key]["ci_high"]
    samples = pq.read_table(tmp_path / "out/eval/samples.parquet").to_pylist()
    by_id = {(s["problem_id"], s["sample_index"]): s for s in samples}
    assert by_id[("0", 1)]["extracted_answer"] == "142.0"
    assert (by_id[("0", 1)]["question"], by_id[("0", 1)]["gold"]) == ("p0", "142")  # beside each response
    assert (by_id[("0", 1)]["correct_strict"], by_id[("0", 1)]["correct_math_verify"]) == (False, True)
    assert by_id[("0", 3)]["extracted_answer"] == "" and not by_id[("0", 3)]["correct_math_verify"]


def test_a_failing_benchmark_does_not_stop_the_others(tmp_path: Path) -> None:
    data = tmp_path / "set.parquet"
    write_parquet_atomic([make_row(f"p{i}", gold, i, "test") for i, gold in enumerate(GOLDS)], data)
    broken = benchmark_configs(["tiny"], [f"paths.artifacts_dir={tmp_path / 'absent'}"])
    good = benchmark_configs(["math500"], [f"benchmark.data_file={data}"])
    target = Target(None, "scripted", "scripted@1")
    outcomes = evaluate_targets([target], broken + good, tmp_path / "out", lambda cfg, path: ScriptedGenerator())
    assert [(o.benchmark, o.status) for o in outcomes] == [("tiny", "failed"), ("math500", "evaluated")]
    assert "test.parquet: no such file" in outcomes[0].message
    metrics = pq.read_table(tmp_path / "out/eval/metrics.parquet").to_pylist()
    assert {m["benchmark"] for m in metrics} == {"math500"}
