"""A benchmark's problems: the prepared evaluation set (prepared from its source first when missing) as prompts."""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from corewarding.config import compose_config
from corewarding.files import SourceError
from corewarding.rows import get_path, read_verl_rows

log = logging.getLogger(__name__)

ID_FIELDS = ("extra_info.unique_id", "extra_info.id", "extra_info.index")


@dataclass(frozen=True)
class Problem:
    """One evaluation problem: its stable id, the chat messages to answer, the gold answer (None: unscorable)."""

    problem_id: str
    messages: list[dict[str, str]]
    gold: str | None


def prepare_benchmark_data(cfg: DictConfig) -> Path:
    """Prepare ``benchmark.datasource`` into ``benchmark.data_file`` with the data pipeline's ``prepare``.

    The prompt-length check is skipped (an evaluation set only flags long prompts, and its tokenizer may not be
    available offline); ``corewarding data prepare NAME`` runs it.
    """
    from corewarding.data.prepare import prepare  # pyarrow: imported when used

    spec = cfg.benchmark
    output = Path(str(spec.data_file))
    if not spec.datasource:
        raise FileNotFoundError(f"{output}: no such file, and benchmark {spec.name!r} names no datasource to prepare")
    overrides = [
        f"datasource={spec.datasource}",
        f"paths.data_dir='{cfg.paths.data_dir}'",
        f"paths.artifacts_dir='{cfg.paths.artifacts_dir}'",
        "datasource.tokenizer=null",
        f"datasource.output='{output}'",
    ]
    if spec.source_file:
        overrides.append(f"datasource.local_file='{spec.source_file}'")
    report = prepare(compose_config(overrides, config_name="data"))
    log.info("prepared %s for %s: %s", output, spec.name, report.summary())
    return output


def _messages(row: dict[str, Any], system_prompt: str, where: str) -> list[dict[str, str]]:
    messages = [{"role": str(m["role"]), "content": str(m["content"])} for m in row["prompt"]]
    if not any(m["role"] == "user" for m in messages):
        raise SourceError(f"{where}: the prompt has no user message")
    if system_prompt != "training":
        messages = [m for m in messages if m["role"] != "system"]
        messages.insert(0, {"role": "system", "content": system_prompt})
    return messages


def _problem_id(row: dict[str, Any], position: int) -> str:
    for path in ID_FIELDS:
        value = get_path(row, path)
        if value is not None:
            return str(value)
    return str(position)


def load_problems(cfg: DictConfig) -> tuple[list[Problem], Path]:
    """The problems of ``cfg.benchmark`` (the first ``limit`` of them) and the prepared file they come from."""
    spec = cfg.benchmark
    path = Path(str(spec.data_file))
    if not path.is_file():
        path = prepare_benchmark_data(cfg)
    rows = read_verl_rows(path)
    if spec.limit is not None:
        rows = rows[: int(spec.limit)]
    problems = []
    for position, row in enumerate(rows):
        where = f"{path}: row {position}"
        gold = get_path(row, str(spec.answer_field))
        messages = _messages(row, str(spec.system_prompt), where)
        problems.append(Problem(_problem_id(row, position), messages, None if gold is None else str(gold)))
    repeated = [pid for pid, count in Counter(p.problem_id for p in problems).items() if count > 1]
    if repeated:
        raise SourceError(f"{path}: problem id {repeated[0]!r} appears more than once")
    if not problems:
        raise SourceError(f"{path}: no problems")
    return problems, path
