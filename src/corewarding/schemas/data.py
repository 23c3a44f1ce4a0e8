"""What a run starts from: the paths every root shares, the base model, the training set, and the data root's
sections (``configs/data.yaml``: datasource, validate, rephrase)."""

from __future__ import annotations

from dataclasses import dataclass

from corewarding.schemas.reading import (
    AT_LEAST_1,
    DTYPES,
    POSITIVE,
    SEED,
    UNIT_INTERVAL,
    WHOLE_OR_NULL,
    Rule,
    one_of,
    setting,
)


@dataclass(frozen=True)
class PathsConfig:
    """``paths`` (configs/paths/default.yaml): where things are written, shared by every root."""

    runs_dir: str = setting("a cell's run directory is {runs_dir}/{cell_id}")
    data_dir: str = setting("prepared and rephrased sets (DVC outputs)")
    artifacts_dir: str = setting("locally built things (the tiny model, the tiny data)")


@dataclass(frozen=True, kw_only=True)
class ShapeConfig:
    """``base_model.shape``: a published model's config.json figures; the verl dry run's memory estimate reads them."""

    params_b: float = setting("parameters, in billions", POSITIVE)
    vocab_size: int = setting("vocabulary rows", AT_LEAST_1)
    hidden_size: int = setting("hidden width", AT_LEAST_1)
    num_layers: int = setting("transformer layers", AT_LEAST_1)
    tie_word_embeddings: bool = setting(
        "input and output embeddings shared (verl loads fp32 on every rank)", default=False
    )


@dataclass(frozen=True, kw_only=True)
class TinyModelConfig:
    """``base_model.tiny``: how the locally built random-weight model is built (tiny/model.py)."""

    seed: int = setting("weight seed", SEED)
    hidden_size: int = setting("hidden width", AT_LEAST_1)
    num_layers: int = setting("transformer layers", AT_LEAST_1)
    num_heads: int = setting("attention heads", AT_LEAST_1)
    head_dim: int | None = setting("per-head width (null: hidden_size / num_heads)", WHOLE_OR_NULL, default=None)
    vocab_size: int = setting("vocabulary rows", AT_LEAST_1)
    architecture: str = setting("the transformers class", one_of("qwen2", "qwen3"), default="qwen2")
    sft_steps: int = setting("supervised warm-start steps (> 0: learns the \\\\boxed format)", SEED)


@dataclass(frozen=True, kw_only=True)
class BaseModelConfig:
    """``base_model`` (configs/base_model/*.yaml): the policy's starting checkpoint."""

    name: str = setting("the option's name (cell ids and run folders use it)")
    hub_name: str = setting("its name in published repo ids ({Method}-{Model}-{Set})")
    hf_id: str | None = setting("the Hub id to load (null: built locally)")
    gated: bool = setting("the Hub serves it only with a token that accepted its licence", default=False)
    dtype: str = setting("the policy's dtype", one_of(*DTYPES))
    builder: str | None = setting("tiny: built here; null: loaded by transformers", one_of("tiny", why="tiny or null"))
    path: str | None = setting("a local folder, which wins over hf_id")
    shape: ShapeConfig | None = setting("published size figures (the verl memory plan)", default=None)
    tiny: TinyModelConfig | None = setting("the tiny model's build settings (builder=tiny)", default=None)


@dataclass(frozen=True)
class SizedSetConfig:
    """``dataset.tiny`` / ``datasource.tiny``: the generated arithmetic set's size and seed."""

    n_train: int = setting("training problems", AT_LEAST_1)
    seed: int = setting("generator seed", SEED)


@dataclass(frozen=True)
class TinySetConfig(SizedSetConfig):
    """``dataset.tiny``: the generated arithmetic set (train and test)."""

    n_test: int = setting("test problems", AT_LEAST_1)


@dataclass(frozen=True, kw_only=True)
class DatasetConfig:
    """``dataset`` (configs/dataset/*.yaml): the training set of a cell and its validation set."""

    name: str = setting("the option's name (cell ids use it)")
    hub_name: str = setting("its name in published repo ids")
    source: str = setting("where the rows come from (a Hub id, or generated)")
    train_files: str = setting("the prepared training parquet")
    rephrased_source: str | None = setting(
        "where rephrased pairs come from (null: the set has no choice)", one_of("release", "generate"), default=None
    )
    rephrased_dirs: dict[str, str] = setting("the pairs' folder per rephrased_source", default={})
    original_files: str = setting("the originals whose rephrasing was kept (Co-rewarding-I)")
    rephrased_files: str = setting("their rephrasings, row-aligned (Co-rewarding-I)")
    val_files: str = setting("the validation parquet")
    rephrased_release: str | None = setting("the paper's released rephrasing on the Hub (null: none)")
    dvc_stages: tuple[str, ...] = setting("DVC stages the pipeline reproduces before training on the set")
    dvc_paired_stages: dict[str, tuple[str, ...]] | tuple[str, ...] = setting(
        "stages that make the rephrased pairs: a list, or one list per rephrased_source"
    )
    tiny: TinySetConfig | None = setting("the generated set's size (source: generated)", default=None)


@dataclass(frozen=True)
class AnswerColumn:
    """One candidate of ``datasource.answer``: a column and how its ground truth is read."""

    column: str = setting("the column (a.b reads a nested field)")
    rule: str = setting("how the ground truth is read", one_of("last_boxed", "after_hashes", "as_given", "items"))


@dataclass(frozen=True, kw_only=True)
class DatasourceConfig:
    """``datasource`` (configs/datasource/*.yaml): one source set and how ``data prepare`` reads it."""

    name: str = setting("the set's name (its folder under paths.data_dir)")
    role: str = setting("train (shared by every model) or eval (kept whole)", one_of("train", "eval"))
    split: str = setting("the prepared file's split", one_of("train", "test"))
    hub_id: str | None = setting("the Hub dataset (null: local_file or generator)")
    hub_config: str | None = setting("the Hub dataset's config")
    hub_split: str | None = setting("the Hub split read")
    local_file: str | None = setting("a local parquet/json/jsonl copy; wins over hub_id")
    generator: str | None = setting("generate instead of reading a source", one_of("tiny", why="tiny or null"))
    tiny: SizedSetConfig | None = setting("the generated set's size (generator=tiny)", default=None)
    question: tuple[str, ...] = setting("candidate question columns, the first present wins")
    answer: tuple[AnswerColumn, ...] = setting("candidate ground-truth columns, the first present wins")
    top_level: tuple[str, ...] = setting("columns kept as top-level columns")
    extra_info: dict[str, str] = setting("extra_info key: source column")
    tokenizer: str | None = setting("counts prompt tokens (base_model: the root's; null: no length check)")
    rephrased_release: str | None = setting("the paper's released rephrasing (import-rephrased)", default=None)
    release_dir: str | None = setting("where import-rephrased writes", default=None)
    rephraser: str | None = setting("the configs/rephrase option data rephrase uses (null: not rephrased)")
    output: str = setting("the prepared parquet")


@dataclass(frozen=True)
class ValidateConfig:
    """``validate`` (configs/data.yaml): which rows a prepared set drops, and the prompt-length limit."""

    max_prompt_tokens: int = setting(
        "prompt tokens allowed, the chat template applied", Rule(lambda v: v >= 1, "an integer >= 1")
    )
    drop: tuple[str, ...] = setting("reasons that drop a training row (the others are flagged)")
    drop_eval: tuple[str, ...] = setting("reasons that drop an evaluation row (datasource.role: eval)")


CHECK_ACTION = one_of("reject", "flag", "off")


@dataclass(frozen=True)
class RewriteCheck:
    """One check of ``rephrase.checks``: what a failed rewrite gets."""

    action: str = setting("reject (retry, then on_failure), flag (kept, listed) or off", CHECK_ACTION)


@dataclass(frozen=True)
class NumbersCheck(RewriteCheck):
    """``rephrase.checks.numbers``: the rewrite keeps the question's numbers."""

    min_kept_fraction: float = setting("the share of the question's numbers the rewrite keeps", UNIT_INTERVAL)
    ignore_single_digits: bool = setting("single digits are not counted")


@dataclass(frozen=True)
class RewriteChecks:
    """``rephrase.checks``: what makes a rewrite fail."""

    placeholder: RewriteCheck = setting("the rewrite holds the instruction's placeholder")
    unchanged: RewriteCheck = setting("the rewrite is the question again")
    numbers: NumbersCheck = setting("the rewrite dropped the question's numbers")


@dataclass(frozen=True)
class RephraseVllmConfig:
    """``rephrase.vllm``: the rephraser's vLLM engine."""

    tensor_parallel_size: int = setting("GPUs per engine", AT_LEAST_1)
    dtype: str = setting("weights' dtype", one_of(*DTYPES))
    gpu_memory_utilization: float = setting("vLLM's share of a GPU's memory", Rule(lambda v: 0 < v <= 1, "in (0, 1]"))
    max_model_len: int = setting("the engine's context length", AT_LEAST_1)


@dataclass(frozen=True, kw_only=True)
class RephraseConfig:
    """``rephrase`` (configs/rephrase/*.yaml): the rephraser of Co-rewarding-I's second view, or the checks of an
    imported rephrasing (backend none); the sampling keys only where it generates."""

    backend: str = setting("transformers, vllm, or none (import only)", one_of("transformers", "vllm", "none"))
    model: str | None = setting("a Hub id, a local folder or base_model (null: none, import only)")
    temperature: float | None = setting("sampling temperature", Rule(lambda v: v > 0, "> 0"), default=None)
    top_p: float | None = setting("nucleus sampling", Rule(lambda v: 0 < v <= 1, "in (0, 1]"), default=None)
    max_new_tokens: int | None = setting("tokens a rewrite may take", Rule(lambda v: v >= 1, ">= 1"), default=None)
    enable_thinking: bool | None = setting("the chat template's thinking mode", default=None)
    batch_size: int | None = setting("questions per generate call (the unit of resuming)", WHOLE_OR_NULL, default=None)
    seed: int = setting("the first attempt's sampling seed", SEED)
    max_retries: int = setting("new tries of a rejected row", Rule(lambda v: v >= 0, ">= 0"))
    on_failure: str = setting("what a row that never passes gets", one_of("keep_original", "drop"))
    checks: RewriteChecks = setting("what makes a rewrite fail")
    vllm: RephraseVllmConfig | None = setting("the engine of backend=vllm", default=None)
