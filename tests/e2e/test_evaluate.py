"""`corewarding evaluate` end to end on CPU: the tiny model on 20 MATH500 problems, every checkpoint of a run, resume.

The MATH500 problems come from ../shared/data (skipped, with the reason, where it is absent); the model is the
project's tiny model, so its answers are mostly wrong: what is checked is the shape, the provenance and the
bookkeeping. The metric arithmetic is checked by hand on scripted answers in tests/unit/evaluation.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from corewarding.cli import main
from corewarding.evaluation.eval_config import benchmark_configs
from corewarding.evaluation.harness import evaluate_targets
from corewarding.evaluation.targets import model_target, run_targets
from corewarding.lm.generation import TransformersGenerator
from corewarding.tiny.model import build_tiny_model


@pytest.fixture(scope="module")
def tiny_model(artifacts_dir: Path) -> Path:
    """The tiny model with its 300-step warm start (the same folder the training tests build)."""
    return build_tiny_model(artifacts_dir / "tiny-model-sft300", sft_steps=300)


def math500_overrides(shared_data: Path, data_dir: Path, *extra: str) -> list[str]:
    return [
        f"benchmark.source_file={shared_data / 'benchmarks' / 'math500' / 'test.jsonl'}",
        f"paths.data_dir={data_dir}",
        "benchmark.limit=20",
        "benchmark.max_new_tokens=24",
        *extra,
    ]


def test_tiny_model_on_20_math500_problems(tiny_model: Path, shared_data: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "eval_out"
    overrides = math500_overrides(
        shared_data, tmp_path / "data", "benchmark.n=2", "benchmark.metrics=[pass@1,avg@2,pass@2,maj@2]"
    )
    argv = ["evaluate", "--model", str(tiny_model), "--benchmarks", "math500", "--out", str(out), *overrides]
    assert main(argv) == 0
    assert "math500" in capsys.readouterr().out

    # the set was prepared from the local copy, with its quality report, as `data prepare` does
    assert (tmp_path / "data" / "math500" / "test.parquet").is_file()
    assert (tmp_path / "data" / "math500" / "test.quality.json").is_file()
    samples = pq.read_table(out / "eval" / "samples.parquet").to_pylist()
    source = [json.loads(line) for line in (shared_data / "benchmarks/math500/test.jsonl").read_text().splitlines()]
    first_20 = [row["unique_id"] for row in source[:20]]
    assert len(samples) == 40
    assert sorted({s["problem_id"] for s in samples}) == sorted(first_20)
    assert {s["sample_index"] for s in samples} == {0, 1}
    golds = {row["unique_id"]: row["answer"] for row in source[:20]}
    for s in samples:
        assert s["step"] is None and s["benchmark"] == "math500"
        assert s["gold"] == golds[s["problem_id"]]
        assert 1 <= s["length"] <= 24 and s["truncated"] == (s["finish_reason"] == "length")
        assert isinstance(s["correct_strict"], bool) and isinstance(s["correct_math_verify"], bool)

    metrics = pq.read_table(out / "eval" / "metrics.parquet").to_pylist()
    assert {(m["checker"], m["metric"]) for m in metrics} == {
        (c, k) for c in ("strict", "math_verify") for k in ("pass@1", "avg@2", "pass@2", "maj@2")
    }
    revision = model_target(str(tiny_model)).revision
    for m in metrics:
        assert m["n"] == 2 and m["num_problems"] == 20 and m["temperature"] == 0.8 and m["seed"] == 0
        assert m["model_revision"] == revision and revision.startswith("sha256:")
        assert m["ci_low"] <= m["value"] <= m["ci_high"]
        if m["metric"] == "pass@1":
            verdicts = [s[f"correct_{m['checker']}"] for s in samples]
            assert m["value"] == pytest.approx(sum(verdicts) / len(verdicts))

    # unchanged inputs: nothing is generated or written again
    before = {p: p.stat().st_mtime_ns for p in (out / "eval").rglob("*") if p.is_file()}
    assert main(argv) == 0
    assert "unchanged" in capsys.readouterr().out
    assert {p: p.stat().st_mtime_ns for p in (out / "eval").rglob("*") if p.is_file()} == before


class CountingGenerator(TransformersGenerator):
    """The real tiny-model generator, counting its calls and able to fail on the call numbered ``fail_on``."""

    calls = 0
    fail_on: int | None = None

    def generate(self, conversations, sampling, seed):  # type: ignore[no-untyped-def]
        type(self).calls += 1
        if type(self).calls == type(self).fail_on:
            raise KeyboardInterrupt("interrupted for the test")
        return super().generate(conversations, sampling, seed)


def counting_factory(cfg, model_path):  # type: ignore[no-untyped-def]
    return CountingGenerator(model_path, batch_size=int(cfg.generation.batch_size))


def test_an_interrupted_evaluation_resumes_to_the_same_results(tiny_model: Path, tmp_path: Path) -> None:
    configs = benchmark_configs(
        ["tiny"], [f"paths.artifacts_dir={tiny_model.parent}", "chunk_size=2", "benchmark.limit=6"]
    )
    from corewarding.tiny.data import write_tiny_dataset

    write_tiny_dataset(tiny_model.parent / "tiny-data", n_train=64, n_test=16, seed=0)
    target = model_target(str(tiny_model))

    CountingGenerator.calls, CountingGenerator.fail_on = 0, None
    whole = evaluate_targets([target], configs, tmp_path / "whole", counting_factory)
    assert whole[0].status == "evaluated" and CountingGenerator.calls == 3  # 6 problems in chunks of 2

    CountingGenerator.calls, CountingGenerator.fail_on = 0, 2
    with pytest.raises(KeyboardInterrupt):
        evaluate_targets([target], configs, tmp_path / "resumed", counting_factory)
    assert not (tmp_path / "resumed" / "eval" / "metrics.parquet").exists()  # nothing half-written
    CountingGenerator.calls, CountingGenerator.fail_on = 0, None
    evaluate_targets([target], configs, tmp_path / "resumed", counting_factory)
    assert CountingGenerator.calls == 2  # chunk 0 was kept; chunks 1 and 2 were generated
    for name in ("samples.parquet", "metrics.parquet"):
        assert pq.read_table(tmp_path / "resumed" / "eval" / name).equals(
            pq.read_table(tmp_path / "whole" / "eval" / name)
        )

    # a scoring change rescores the stored generations without generating anything
    CountingGenerator.calls = 0
    strict_only = benchmark_configs(["tiny"], [f"paths.artifacts_dir={tiny_model.parent}", "chunk_size=2",
                                               "benchmark.limit=6", "checkers=[strict]"])  # fmt: skip
    outcome = evaluate_targets([target], strict_only, tmp_path / "whole", counting_factory)
    assert outcome[0].status == "rescored" and CountingGenerator.calls == 0
    checkers = {m["checker"] for m in pq.read_table(tmp_path / "whole" / "eval" / "metrics.parquet").to_pylist()}
    assert checkers == {"strict"}


def test_every_checkpoint_step_of_a_run(tiny_model: Path, tmp_path: Path, capsys) -> None:
    from corewarding.config import compose_config
    from corewarding.training.local.trainer import train

    runs = tmp_path / "runs"
    overrides = ["experiment=tiny_cpu", f"paths.artifacts_dir={tiny_model.parent}", f"paths.runs_dir={runs}",
                 "base_model.tiny.sft_steps=300", "schedule.total_steps=4", "schedule.save_freq=2",
                 "schedule.val_max_samples=2"]  # fmt: skip
    result = train(compose_config(overrides))
    assert sorted(t.step for t in run_targets(result.run_dir) if t.step is not None) == [2, 4]
    with pytest.raises(FileNotFoundError, match=r"no checkpoint for step\(s\) \[3\]; saved steps: \[2, 4\]"):
        run_targets(result.run_dir, "3")

    argv = ["evaluate", "--run", "gt_grpo__tiny__tiny", "--benchmarks", "tiny", "--include-base",
            f"paths.runs_dir={runs}", f"paths.artifacts_dir={tiny_model.parent}", "benchmark.limit=3"]  # fmt: skip
    assert main(argv) == 0
    metrics = pq.read_table(result.run_dir / "eval" / "metrics.parquet").to_pylist()
    assert sorted({m["step"] for m in metrics}, key=lambda s: -1 if s is None else s) == [None, 2, 4]
    revisions = {m["step"]: m["model_revision"] for m in metrics}
    assert len(set(revisions.values())) == 3  # base, step 2 and step 4 are different weights

    # the results store takes them as they are
    from corewarding.results.ingest.ingestion import ingest

    db = tmp_path / "results.duckdb"
    ingest(db, [runs])
    import duckdb

    with duckdb.connect(str(db), read_only=True) as con:
        steps = con.execute("SELECT DISTINCT step FROM eval_metrics ORDER BY step NULLS FIRST").fetchall()
    assert steps == [(None,), (2,), (4,)]


IFEVAL_ROWS = [  # google/IFEval's row format; instructions whose checks need no downloaded nltk data
    {"key": 1, "prompt": "Write about pears. Do not use any commas.", "instruction_id_list": ["punctuation:no_comma"],
     "kwargs": [{}]},
    {"key": 2, "prompt": "Describe rain in lowercase letters only.",
     "instruction_id_list": ["change_case:english_lowercase"], "kwargs": [{}]},
]  # fmt: skip


def test_external_benchmarks_run_their_tool_or_are_skipped_with_a_message(
    tiny_model: Path, tmp_path: Path, capsys, monkeypatch
) -> None:
    pytest.importorskip("lm_eval", reason="lm-eval is not installed (the eval extra)")
    monkeypatch.delenv("ZEROEVAL_ROOT", raising=False)
    data = tmp_path / "ifeval.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in IFEVAL_ROWS))
    out = tmp_path / "out"
    argv = ["evaluate", "--model", str(tiny_model), "--benchmarks", "ifeval,crux", "--out", str(out),
            "benchmark.max_new_tokens=8", f"++benchmark.options.data_files={data}"]  # fmt: skip
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "crux skipped: ZEROEVAL_ROOT is not set" in printed
    metrics = {m["metric"]: m for m in pq.read_table(out / "eval" / "metrics.parquet").to_pylist()}
    assert {m["benchmark"] for m in metrics.values()} == {"ifeval"}  # nothing written for the skipped one
    four = ["prompt_level_strict_acc", "inst_level_strict_acc", "prompt_level_loose_acc", "inst_level_loose_acc"]
    assert metrics["score"]["value"] == pytest.approx(sum(metrics[k]["value"] for k in four) / 4)
    assert all(m["checker"] == "lm_eval" and m["num_problems"] == 2 for m in metrics.values())
    assert (out / "eval" / "units" / "base" / "ifeval" / "tool_output").is_dir()  # the tool's own full output
