"""``corewarding data prepare``: one source (Hub id, local file or generator) -> a validated verl parquet + report."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from corewarding.data.checks import check_validate
from corewarding.data.fields import FieldSpec, read_answer, read_question
from corewarding.data.quality import Candidate, QualityReport, validate
from corewarding.data.sources import Records, columns_of, load_source
from corewarding.files import SourceError, write_json_atomic, write_parquet_atomic
from corewarding.rows import get_path, make_row
from corewarding.schemas import DatasourceConfig, section_of
from corewarding.tiny.data import make_tiny_dataset

log = logging.getLogger(__name__)


def report_path(output: Path) -> Path:
    """The quality report beside an output parquet: ``train.parquet`` -> ``train.quality.json``."""
    return output.with_name(output.name.removesuffix(".parquet") + ".quality.json")


def _generated(spec: DatasourceConfig) -> tuple[Records, str]:
    if spec.generator != "tiny":
        raise SourceError(f"datasource.generator={spec.generator!r}: expected tiny or null")
    if spec.tiny is None:
        raise SourceError("datasource.tiny: missing (generator=tiny needs n_train and seed)")
    data = make_tiny_dataset(n_train=spec.tiny.n_train, n_test=0, seed=spec.tiny.seed)
    records = [
        {"question": r["prompt"][-1]["content"], "answer": p.answer}
        for r, p in zip(data.train, data.train_problems, strict=True)
    ]
    return records, f"generated:tiny(n_train={spec.tiny.n_train}, seed={spec.tiny.seed})"


def build_candidates(records: Records, spec: DatasourceConfig, source: str) -> list[Candidate]:
    """Map every source record to a verl row (top-level extra columns first, as in the reference files)."""
    fields = FieldSpec.from_config(spec)
    question_col, (answer_col, rule) = fields.resolve(columns_of(records), source)
    candidates = []
    for i, record in enumerate(records):
        where = f"{source}: row {i}"
        question = read_question(record, question_col, where)
        answer = read_answer(record, answer_col, rule, where)
        info = {key: get_path(record, column) for key, column in fields.extra_info.items()}
        row: dict[str, Any] = {column: get_path(record, column) for column in fields.top_level}
        row.update(make_row(question or "", answer, i, spec.split, **info))
        candidates.append(Candidate(i, row, question, answer))
    return candidates


def prompt_length_counter(name: str | None, cfg: DictConfig) -> Callable[[list[dict[str, Any]]], list[int]] | None:
    """A function counting chat-template prompt tokens under tokenizer ``name`` (None: no check)."""
    if not name:
        return None
    from corewarding.data.models import load_tokenizer  # transformers: imported when used

    tokenizer = load_tokenizer(str(name), cfg)

    def count(rows: list[dict[str, Any]]) -> list[int]:
        texts = [tokenizer.apply_chat_template(r["prompt"], tokenize=False, add_generation_prompt=True) for r in rows]
        if not texts:
            return []
        return [len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]]

    return count


def prepare(cfg: DictConfig) -> QualityReport:
    """Prepare ``cfg.datasource``: write its parquet and quality report (both atomically) and return the report."""
    checks = check_validate(cfg)
    spec = section_of(cfg, DatasourceConfig)
    output = Path(spec.output)
    records, source = _generated(spec) if spec.generator else load_source(spec)
    candidates = build_candidates(records, spec, source)
    report = QualityReport(spec.name, "prepare", spec.split, source, str(output))
    counter = prompt_length_counter(spec.tokenizer, cfg)
    report.prompt_tokens["tokenizer"] = spec.tokenizer
    drop = checks.drop_eval if spec.role == "eval" else checks.drop
    kept = validate(candidates, report, list(drop), counter, checks.max_prompt_tokens)
    if not kept:
        raise SourceError(f"{source}: no rows left after validation ({report.summary()})")
    write_parquet_atomic(kept, output)
    write_json_atomic(report.to_dict(), report_path(output))
    log.info("%s -> %s", report.summary(), output)
    return report
