"""A new lm-eval benchmark is one YAML file: the registry, the call, the parsing and the unit all pick it up."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from corewarding.config import CONFIG_DIR_ENV, compose_config, config_dir
from corewarding.evaluation.external import RunSettings, external_benchmarks, missing_reason, run_external
from corewarding.evaluation.external.lm_eval_tasks import build_lm_eval_call, lm_eval_task, parse_lm_eval_results
from corewarding.evaluation.harness import ModelHandle, evaluate_unit
from corewarding.evaluation.provenance import UnitSettings
from corewarding.evaluation.targets import Target

HAS_LM_EVAL = importlib.util.find_spec("lm_eval") is not None

NEW_YAML = """\
# @package _global_
benchmark:
  name: gpqa_diamond
  kind: external
  tool: lm_eval
  task: gpqa_diamond_cot_zeroshot
  lm_eval:
    filter: flexible-extract
    metrics:
      accuracy: exact_match
  n: 1
  temperature: 0.6
  top_p: 0.95
  max_new_tokens: 512
  limit: null
  options: {}
"""


def _results() -> dict[str, Any]:
    """Shaped as lm-eval 0.4.13's ``simple_evaluate`` returns a single task's result."""
    return {
        "results": {
            "gpqa_diamond_cot_zeroshot": {
                "alias": "gpqa_diamond_cot_zeroshot",
                "exact_match,strict-match": 0.10,
                "exact_match_stderr,strict-match": 0.02,
                "exact_match,flexible-extract": 0.30,
                "exact_match_stderr,flexible-extract": 0.03,
            }
        },
        "group_subtasks": {"gpqa_diamond_cot_zeroshot": []},
        "n-samples": {"gpqa_diamond_cot_zeroshot": {"original": 198, "effective": 198}},
    }


@pytest.fixture
def configs_with_new_benchmark(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of configs/ with one more benchmark file, and nothing else changed."""
    configs = tmp_path / "configs"
    shutil.copytree(config_dir(), configs)
    (configs / "benchmark" / "gpqa_diamond.yaml").write_text(NEW_YAML, encoding="utf-8")
    monkeypatch.setenv(CONFIG_DIR_ENV, str(configs))
    return configs


def test_the_registry_and_the_parsing_read_the_new_yaml(configs_with_new_benchmark: Path) -> None:
    found = external_benchmarks()
    assert list(found) == ["gpqa_diamond", "ifeval", "mmlu_pro", "livecodebench_v6", "crux"]  # grouped by tool
    bench = found["gpqa_diamond"]
    assert (bench.tool, bench.task) == ("lm_eval", "gpqa_diamond_cot_zeroshot")
    assert (bench.sampling.temperature, bench.sampling.top_p, bench.sampling.max_new_tokens) == (0.6, 0.95, 512)
    assert compose_config(["+benchmark=gpqa_diamond"]).benchmark.kind == "external"

    task = lm_eval_task("gpqa_diamond")
    call = build_lm_eval_call(task, "m", bench.sampling, RunSettings(backend="hf", seed=2))
    assert call["tasks"] == ["gpqa_diamond_cot_zeroshot"] and call["random_seed"] == 2
    assert call["gen_kwargs"] == {"do_sample": True, "temperature": 0.6, "top_p": 0.95, "max_gen_toks": 512}
    metrics, stderr, n = parse_lm_eval_results(task, _results())
    assert metrics == {"accuracy": 0.30} and stderr == {"accuracy": 0.03} and n == 198  # the declared filter's

    reason = missing_reason("gpqa_diamond", RunSettings(backend="hf"))
    assert reason is None if HAS_LM_EVAL else reason is not None and reason.startswith("gpqa_diamond skipped")


@pytest.mark.skipif(not HAS_LM_EVAL, reason="needs lm-eval (pip install 'corewarding[eval]')")
def test_the_new_benchmark_runs_as_a_unit(
    configs_with_new_benchmark: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import lm_eval

    calls: list[dict[str, Any]] = []

    def simple_evaluate(**call: Any) -> dict[str, Any]:
        calls.append(call)
        return {**_results(), "samples": {"gpqa_diamond_cot_zeroshot": []}}

    monkeypatch.setattr(lm_eval, "simple_evaluate", simple_evaluate)
    result = run_external("gpqa_diamond", "m", tmp_path / "direct", settings=RunSettings(backend="hf"))
    assert (result.benchmark, result.tool, result.metrics, result.num_problems) == (
        "gpqa_diamond",
        "lm_eval",
        {"accuracy": 0.30},
        198,
    )
    assert result.raw_path == tmp_path / "direct" / "lm_eval_gpqa_diamond_results.json"

    cfg = compose_config(["benchmark=gpqa_diamond", "seed=5"], config_name="eval")
    target = Target(step=None, model_path="m", revision="r")
    handle = ModelHandle(target, lambda cfg, path: pytest.fail("an external unit loads no model"))
    unit = UnitSettings.from_config(cfg)
    outcome = evaluate_unit(cfg, unit, target, tmp_path / "units", handle, None)
    assert (outcome.status, outcome.metrics) == ("evaluated", {"accuracy": 0.30})
    assert calls[-1]["model"] == "hf" and calls[-1]["random_seed"] == 5  # generation=transformers: lm-eval's hf
    assert calls[-1]["tasks"] == ["gpqa_diamond_cot_zeroshot"]
    folder = tmp_path / "units" / "base" / "gpqa_diamond"
    record = json.loads((folder / "unit.json").read_text())
    assert (record["tool"], (folder / "metrics.parquet").is_file(), (folder / "samples.parquet").exists()) == (
        "lm_eval",
        True,
        False,
    )
    assert evaluate_unit(cfg, unit, target, tmp_path / "units", handle, None).status == "unchanged"
    assert len(calls) == 2  # the direct run above and the unit's: the unchanged unit ran nothing
