"""Every option of every config group reads into its typed schema (issue 46), and a missing or misspelt key fails the
composition in one line naming the key and, where the key comes from an option file, the file."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from corewarding.config import CONFIG_DIR_ENV, ConfigError, compose_config, config_dir
from corewarding.data.fields import ANSWER_RULES
from corewarding.schemas import (
    AnswerColumn,
    BaseModelConfig,
    BenchmarkConfig,
    DatasetConfig,
    DatasourceConfig,
    GenerationConfig,
    PathsConfig,
    RephraseConfig,
    TinyModelConfig,
    ValidateConfig,
    section_of,
    typed,
)


def _options(group: str) -> list[str]:
    return sorted(p.stem for p in (config_dir() / group).glob("*.yaml"))


@pytest.mark.parametrize("group", ["method", "base_model", "dataset"])
def test_every_training_option_reads_typed(group: str) -> None:
    for option in _options(group):
        cfg = compose_config([f"{group}={option}"])  # validate_config reads every section of the training root
        assert section_of(cfg, PathsConfig).runs_dir == "runs"
        model = section_of(cfg, BaseModelConfig)
        dataset = section_of(cfg, DatasetConfig)
        assert (model.name, dataset.name) == (
            option if group == "base_model" else "tiny",
            option if group == "dataset" else "tiny",
        )


def test_the_base_models_and_datasets_read_their_nested_settings() -> None:
    big = section_of(compose_config(["base_model=qwen3-8b-base", "dataset=math"]), BaseModelConfig)
    assert big.shape is not None and big.shape.num_layers == 36 and big.tiny is None and not big.gated
    vocab = section_of(compose_config(["base_model=tiny-qwen3-vocab"]), BaseModelConfig)
    assert vocab.tiny == TinyModelConfig(
        seed=0, hidden_size=128, num_layers=2, num_heads=2, head_dim=64, vocab_size=151936, architecture="qwen3",
        sft_steps=0,
    )  # fmt: skip
    tiny = section_of(compose_config([]), BaseModelConfig).tiny
    assert tiny is not None and (tiny.head_dim, tiny.architecture) == (None, "qwen2")  # the defaults of left-out keys
    assert section_of(compose_config(["base_model=llama-3.2-3b-instruct"]), BaseModelConfig).gated
    math = section_of(compose_config(["dataset=math"]), DatasetConfig)
    assert math.dvc_paired_stages == {"release": ("import_rephrased@math",), "generate": ("rephrase@math",)}
    assert math.rephrased_dirs["generate"] == "data/math" and math.tiny is None
    small = section_of(compose_config([]), DatasetConfig)
    assert small.dvc_paired_stages == () and small.tiny is not None and small.tiny.n_test == 16


def test_every_benchmark_reads_typed_with_either_generation_backend() -> None:
    kinds = {}
    for option in _options("benchmark"):
        for generation in _options("generation"):
            cfg = compose_config([f"benchmark={option}", f"generation={generation}"], config_name="eval")
            kinds[option] = section_of(cfg, BenchmarkConfig).kind
            assert section_of(cfg, GenerationConfig).backend == generation
    assert kinds["math500"] == "math" and kinds["ifeval"] == "external" and len(kinds) == 13
    ifeval = section_of(compose_config(["benchmark=ifeval"], config_name="eval"), BenchmarkConfig)
    assert ifeval.lm_eval is not None and ifeval.lm_eval.mean_as == "score" and ifeval.options == {}
    vllm = section_of(compose_config(["generation=vllm"], config_name="eval"), GenerationConfig)
    assert (vllm.max_model_len, vllm.batch_size, vllm.device) == (4096, None, None)


def test_every_datasource_reads_typed() -> None:
    roles = {}
    for option in _options("datasource"):
        spec = section_of(compose_config([f"datasource={option}"], config_name="data"), DatasourceConfig)
        roles[option] = spec.role
        assert spec.name == option and spec.answer and all(isinstance(a, AnswerColumn) for a in spec.answer)
    assert roles["math"] == "train" and roles["math500"] == "eval" and len(roles) == 13
    minerva = section_of(compose_config(["datasource=minerva_math"], config_name="data"), DatasourceConfig)
    assert minerva.answer[1] == AnswerColumn(column="solution", rule="last_boxed")
    tiny = section_of(compose_config([], config_name="data"), DatasourceConfig)
    assert tiny.tiny is not None and tiny.tiny.n_train == 64 and tiny.release_dir is None


def test_every_rephraser_reads_typed_and_the_answer_rules_are_the_readers() -> None:
    backends = {}
    for option in _options("rephrase"):
        cfg = compose_config([f"rephrase={option}"], config_name="data")
        backends[option] = section_of(cfg, RephraseConfig).backend
    assert backends == {"qwen3_32b_vllm": "vllm", "release": "none", "transformers_tiny": "transformers"}
    release = section_of(compose_config(["rephrase=release"], config_name="data"), RephraseConfig)
    assert release.temperature is None and release.vllm is None and release.checks.numbers.action == "flag"
    assert section_of(compose_config([], config_name="data"), ValidateConfig).drop == ("empty_question",)
    rule = next(f for f in dataclasses.fields(AnswerColumn) if f.name == "rule").metadata["rule"]
    assert all(rule.ok(name) for name in ANSWER_RULES) and not rule.ok("first_boxed")


@pytest.fixture
def configs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of configs/ that a test may break, composed from the test's working directory."""
    copy = tmp_path / "configs"
    shutil.copytree(config_dir(), copy)
    monkeypatch.setenv(CONFIG_DIR_ENV, str(copy))
    monkeypatch.chdir(tmp_path)
    return copy


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


@pytest.mark.parametrize(
    ("group", "option", "old", "new", "root", "message"),
    [
        ("base_model", "qwen3-8b-base", "  hf_id:", "  hf_idd:", "config",
         "configs/base_model/qwen3-8b-base.yaml: base_model.hf_idd: unknown key; base_model has name, hub_name, "),
        ("base_model", "qwen3-8b-base", "    num_layers: 36\n", "", "config",
         "configs/base_model/qwen3-8b-base.yaml: base_model.shape.num_layers: missing"),
        ("dataset", "openrs", "  val_files:", "  val_file:", "config",
         "configs/dataset/openrs.yaml: dataset.val_file: unknown key; dataset has "),
        ("paths", "default", "  data_dir: data ", "  data_dir: 7 ", "config",
         "configs/paths/default.yaml: paths.data_dir=7: must be of type str"),
        ("benchmark", "gsm8k", "  n: 1 ", "  n: 0 ", "eval",
         "configs/benchmark/gsm8k.yaml: benchmark.n=0: must be an integer >= 1"),
        ("benchmark", "amc", "  answer_field: reward_model.ground_truth\n", "", "eval",
         "configs/benchmark/amc.yaml: benchmark.answer_field: missing (benchmark.kind=math needs it)"),
        ("benchmark", "crux", "  tool: zeroeval\n", "", "eval",
         "configs/benchmark/crux.yaml: benchmark.tool: missing (benchmark.kind=external needs it)"),
        ("generation", "vllm", "  enforce_eager: false", "  enforce_eagre: false", "eval",
         "configs/generation/vllm.yaml: generation.enforce_eagre: unknown key; generation has backend, "),
        ("datasource", "gsm8k", "rule: after_hashes", "rule: after_hash", "data",
         "configs/datasource/gsm8k.yaml: datasource.answer[0].rule='after_hash': must be one of last_boxed, "),
        ("datasource", "math", "  top_level: [level, type]", "  top_level: level", "data",
         "configs/datasource/math.yaml: datasource.top_level='level': must be of type tuple[str, ...]"),
        ("rephrase", "transformers_tiny", "min_kept_fraction: 0.5", "min_kept_fraction: 2", "data",
         "configs/rephrase/transformers_tiny.yaml: rephrase.checks.numbers.min_kept_fraction=2: must be in [0, 1]"),
    ],
)  # fmt: skip
def test_a_broken_option_file_is_one_line_naming_the_file_and_key(
    configs: Path, group: str, option: str, old: str, new: str, root: str, message: str
) -> None:
    _edit(configs / group / f"{option}.yaml", old, new)
    picks = [] if group == "paths" else [f"{group}={option}"]  # transformers_tiny: the data root's default
    with pytest.raises(ConfigError) as caught:
        compose_config(picks, config_name=root)
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value), str(caught.value)


def test_a_key_an_override_sets_names_no_file(configs: Path) -> None:
    with pytest.raises(ConfigError, match=r"^base_model\.dtype='int8': must be one of float32, bfloat16, float16$"):
        compose_config(["base_model=qwen3-8b-base", "base_model.dtype=int8"])
    with pytest.raises(ConfigError, match=r"^datasource\.role='dev': must be one of train, eval$"):
        compose_config(["datasource=math", "datasource.role=dev"], config_name="data")


def test_a_left_out_optional_key_takes_its_default_and_a_required_one_is_missing() -> None:
    spec = {"name": "x", "role": "eval", "split": "test", "hub_id": "a/b", "hub_config": None, "hub_split": "test",
            "local_file": None, "generator": None, "question": ["q"], "answer": [{"column": "a", "rule": "items"}],
            "top_level": [], "extra_info": {}, "tokenizer": None, "rephraser": None, "output": "o.parquet"}  # fmt: skip
    read = typed(DatasourceConfig, spec, "datasource")
    assert read.release_dir is None and read.tiny is None and read.question == ("q",)
    del spec["output"]
    with pytest.raises(ConfigError, match=r"^datasource\.output: missing$"):
        typed(DatasourceConfig, spec, "datasource")
    with pytest.raises(ConfigError, match=r"^datasource\.answer\[0\]\.column: missing$"):
        typed(DatasourceConfig, {**spec, "output": "o", "answer": [{"rule": "items"}]}, "datasource")
