"""Benchmark registry, evaluation config checks, targets and problem loading."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from corewarding.config import ConfigError, compose_config
from corewarding.evaluation.benchmarks import load_problems
from corewarding.evaluation.eval_config import benchmark_configs, check_eval, expand_benchmarks, known_benchmarks
from corewarding.evaluation.targets import folder_fingerprint, model_target, select_steps
from corewarding.files import SourceError, write_parquet_atomic
from corewarding.rows import SYSTEM_PROMPT, make_row

MATH = ["math500", "gsm8k", "amc", "aime24", "aime25", "minerva_math", "olympiadbench", "math_test"]


def test_every_paper_benchmark_has_a_config_with_the_paper_protocol() -> None:
    assert set(MATH) <= set(known_benchmarks())
    for cfg in benchmark_configs(MATH, []):
        spec = cfg.benchmark
        assert spec.kind == "math" and spec.max_new_tokens == 3072 and spec.system_prompt == "training"
        assert spec.datasource == spec.name  # prepared by `corewarding data prepare <name>`
        assert spec.temperature == (0.0 if spec.name == "math_test" else 0.8)
    amc = compose_config(["benchmark=amc"], config_name="eval").benchmark
    assert amc.n == 8 and "avg@8" in amc.metrics


def test_suites_expand_and_unknown_names_are_listed() -> None:
    assert expand_benchmarks("paper_math") == ["math500", "gsm8k", "amc"]
    assert expand_benchmarks("math500, amc,math500") == ["math500", "amc"]
    with pytest.raises(ConfigError, match=r"unknown benchmark 'math501'; known: .*math500"):
        expand_benchmarks("math501")


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("benchmark.metrics=[pass@8]", r"pass@8 needs k <= the samples per problem \(1\)"),
        ("benchmark.metrics=[best@1]", "'best@1' is not pass@k, avg@k or maj@k"),
        ("benchmark.temperature=-1", r"benchmark.temperature=-1: must be >= 0"),
        ("benchmark.n=0", r"benchmark.n=0: must be an integer >= 1"),
        ("checkers=[strict,lenient]", r"checkers=.*must be a non-empty list of strict, math_verify"),
        ("generation.backend=sglang", r"generation.backend='sglang': must be transformers or vllm"),
        ("bootstrap.confidence=1.5", r"bootstrap.confidence=1.5: must be in \(0, 1\)"),
    ],
)
def test_bad_values_name_their_key(override: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        check_eval(compose_config(["benchmark=math500", override], config_name="eval"))


def test_greedy_benchmarks_allow_only_k_1() -> None:
    cfg = compose_config(["benchmark=math_test", "benchmark.n=8", "benchmark.metrics=[maj@8]"], config_name="eval")
    with pytest.raises(ConfigError, match="greedy"):
        check_eval(cfg)


def _write_set(path: Path, questions: list[str], ids: list[str]) -> None:
    rows = [make_row(q, str(i), i, "test", unique_id=u) for i, (q, u) in enumerate(zip(questions, ids, strict=True))]
    write_parquet_atomic(rows, path)


def test_problems_keep_the_training_prompt_or_take_a_literal_one(tmp_path: Path) -> None:
    data = tmp_path / "set.parquet"
    _write_set(data, ["1+1?", "2+2?"], ["a", "b"])
    cfg = compose_config(["benchmark=math500", f"benchmark.data_file={data}"], config_name="eval")
    problems, _ = load_problems(cfg)
    assert [p.problem_id for p in problems] == ["a", "b"] and [p.gold for p in problems] == ["0", "1"]
    assert problems[0].messages == [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": "1+1?"}]
    cfg = compose_config(["benchmark=math500", f"benchmark.data_file={data}", "benchmark.system_prompt=Be brief."],
                         config_name="eval")  # fmt: skip
    assert load_problems(cfg)[0][1].messages[0] == {"role": "system", "content": "Be brief."}


def test_repeated_problem_ids_and_missing_sets_are_errors(tmp_path: Path) -> None:
    data = tmp_path / "set.parquet"
    _write_set(data, ["1+1?", "2+2?"], ["a", "a"])
    cfg = compose_config(["benchmark=math500", f"benchmark.data_file={data}"], config_name="eval")
    with pytest.raises(SourceError, match=r"set.parquet: problem id 'a' appears more than once"):
        load_problems(cfg)
    cfg = compose_config(["benchmark=tiny", f"paths.artifacts_dir={tmp_path / 'none'}"], config_name="eval")
    with pytest.raises(FileNotFoundError, match="no such file, and benchmark 'tiny' names no datasource"):
        load_problems(cfg)


def test_a_folder_fingerprint_follows_its_weights(tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    (model / "model.safetensors").write_bytes(b"\x00" * 1000)
    first = folder_fingerprint(model)
    assert first == model_target(str(model)).revision
    (model / "model.safetensors").write_bytes(b"\x00" * 999 + b"\x01")
    assert folder_fingerprint(model) != first


def test_a_hub_id_resolves_to_its_commit_from_the_local_cache(tmp_path: Path, monkeypatch, artifacts_dir: Path) -> None:
    from corewarding.tiny.model import build_tiny_model

    tiny = build_tiny_model(artifacts_dir / "tiny-model-sft0")
    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "hub" / "models--my-lab--Tiny-Model"
    shutil.copytree(tiny, repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    target = model_target("my-lab/Tiny-Model")
    assert target.revision == f"my-lab/Tiny-Model@{commit}"
    assert Path(target.model_path) == repo / "snapshots" / commit
    with pytest.raises(FileNotFoundError, match="'my-lab/Absent': not a local folder and not loadable from the Hub"):
        model_target("my-lab/Absent")
    with pytest.raises(FileNotFoundError, match="not a model folder and not a Hub id"):
        model_target("./no/such/folder")


def test_step_selection() -> None:
    assert select_steps([10, 20, 30], "all") == [10, 20, 30]
    assert select_steps([10, 20, 30], "last") == [30]
    assert select_steps([10, 20, 30], "10,30") == [10, 30]
    with pytest.raises(ValueError, match="expected all, last, or steps like 10,20"):
        select_steps([10], "ten")
