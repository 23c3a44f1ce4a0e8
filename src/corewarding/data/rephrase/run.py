"""``corewarding data rephrase``: rephrase every question of a prepared set, resumably.

Rows are processed in fixed chunks of ``rephrase.batch_size``; a chunk's generations (every attempt) are appended to
the raw JSON-lines log once the chunk is finished, and a rerun skips the chunks already there. Chunks and seeds do
not depend on where a run stopped, so an interrupted and resumed run writes the same files as an uninterrupted one.
The log is never truncated: lines of other generation settings stay (switching back resumes from them), and the
backend is checked before the log is touched, so a run that cannot generate here leaves it as it was.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

from omegaconf import DictConfig

from corewarding.data.checks import check_rephrase
from corewarding.data.models import resolve_model_source
from corewarding.data.quality import QualityReport
from corewarding.data.rephrase.outputs import Outcome, RephrasePaths, write_outputs
from corewarding.data.rephrase.parse import Verdict, parse_generation
from corewarding.data.rephrase.prompt import INSTRUCTION, rephrase_messages
from corewarding.files import SourceError, atomic_path, parse_json, read_text
from corewarding.lm.generation import (
    Conversation,
    SamplingSettings,
    TransformersGenerator,
    VLLMEngine,
    VLLMGenerator,
    vllm_dtype,
)
from corewarding.lm.generation import check_backend as check_generation_backend
from corewarding.rows import question_of, read_verl_rows
from corewarding.schemas import DatasourceConfig, RephraseConfig, section_of

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Generation:
    """One reply as the raw log records it; ``finish`` is stop, length, or prompt_too_long (nothing generated)."""

    text: str
    finish: str


class Generator(Protocol):
    """Generates one reply per conversation; ``seeds`` gives one seed per conversation."""

    def generate(self, conversations: list[Conversation], seeds: list[int]) -> list[Generation]: ...


class Rephraser:
    """lm's text generator with ``rephrase``'s sampling: one reply per conversation, each with its own seed."""

    def __init__(self, generator: TransformersGenerator | VLLMGenerator, spec: RephraseConfig) -> None:
        self.generator = generator
        if spec.temperature is None or spec.top_p is None or spec.max_new_tokens is None:
            raise ValueError("rephrase.temperature, top_p and max_new_tokens: generating needs them")
        self.sampling = SamplingSettings(1, spec.temperature, spec.top_p, spec.max_new_tokens)

    def generate(self, conversations: list[Conversation], seeds: list[int]) -> list[Generation]:
        replies = self.generator.sample(conversations, self.sampling, seeds)
        return [Generation(reply.text, reply.finish_reason) for [reply] in replies]


def check_backend(spec: RephraseConfig) -> None:
    """Refuse a ``rephrase.backend`` that cannot run here (vllm: not installed, or neither a GPU nor vLLM's CPU
    build) with one clear error."""
    check_generation_backend(spec.backend, "rephrase.backend=vllm", "rephrase=transformers_tiny")


def make_generator(spec: RephraseConfig, source: str) -> Generator:
    """The generator ``rephrase.backend`` names: the whole chunk in one call, the chat template told
    ``enable_thinking``, prompts fitted to the context, the model's own dtype and generation config."""
    check_backend(spec)
    chat_kwargs = {"enable_thinking": bool(spec.enable_thinking)}
    if spec.backend == "transformers":
        model = TransformersGenerator(
            source, dtype=None, batch_size=None, chat_kwargs=chat_kwargs, fit_context=True, pin_sampling=False
        )
        return Rephraser(model, spec)
    if spec.backend == "vllm":
        vllm = spec.vllm
        if vllm is None:
            raise ValueError("rephrase.vllm: missing (rephrase.backend=vllm needs its engine settings)")
        engine = VLLMEngine(vllm.dtype, vllm.tensor_parallel_size, vllm.gpu_memory_utilization, vllm.max_model_len)
        return Rephraser(VLLMGenerator(source, engine, spec.seed, chat_kwargs), spec)
    raise ValueError(f"rephrase.backend={spec.backend!r}: expected transformers or vllm")


def chunk_size(spec: RephraseConfig) -> int:
    """``rephrase.batch_size``: the rows of a chunk (the unit of resuming), which generating needs."""
    if spec.batch_size is None:
        raise ValueError("rephrase.batch_size: missing (generating needs it)")
    return spec.batch_size


def row_seed(base: int, row: int, attempt: int) -> int:
    """The sampling seed of one row's attempt (a retry gets a new one)."""
    return base * 1_000_003 + row * 101 + attempt


# The settings that change what is generated; checks, retries and failure handling only change how the same
# generations are judged, so changing them re-judges the log instead of throwing it away.
GENERATION_KEYS = ("backend", "temperature", "top_p", "max_new_tokens", "enable_thinking", "batch_size", "seed")


def run_key(spec: RephraseConfig, model_source: str, questions: list[str]) -> str:
    """Identifies what the raw log was generated from: sampling settings, the model, the prompt, the questions."""
    settings: dict[str, Any] = {key: getattr(spec, key) for key in GENERATION_KEYS}
    dtype = spec.vllm.dtype if spec.vllm is not None else None
    settings["dtype"] = vllm_dtype(str(dtype)) if spec.backend == "vllm" and dtype is not None else dtype
    digest = hashlib.sha256(json.dumps([settings, model_source, INSTRUCTION], sort_keys=True).encode())
    for question in questions:
        digest.update(question.encode() + b"\0")
    return digest.hexdigest()[:16]


def judge(record: dict[str, Any], question: str, checks: Any) -> dict[str, Any]:
    """Re-parse a logged generation under the current checks."""
    if record.get("finish") == "prompt_too_long":
        verdict = Verdict(None, "prompt_too_long", "the prompt does not fit the model's context")
    else:
        verdict = parse_generation(str(record["text"]), question, checks)
    flags = [list(f) for f in verdict.flags]
    return (
        record
        | {"accepted": verdict.accepted, "rewrite": verdict.rewrite, "reason": verdict.reason}
        | {
            "detail": verdict.detail,
            "flags": flags,
        }
    )


def _finished(attempts: list[dict[str, Any]], max_retries: int) -> bool:
    """A row's records are what an uninterrupted run would have logged: rejections, then an acceptance or the end."""
    if [a["attempt"] for a in attempts] != list(range(len(attempts))):
        return False
    if any(a["accepted"] for a in attempts[:-1]):
        return False
    return bool(attempts[-1]["accepted"]) or attempts[-1]["attempt"] >= max_retries


def load_raw(
    path: Path, key: str, questions: list[str], spec: RephraseConfig
) -> tuple[dict[int, list[dict[str, Any]]], list[str]]:
    """The finished chunks' records of an earlier run with the same key, re-judged under the current checks, and
    the lines the log should hold before new generations are appended (read only; rewrite_raw writes them).

    Lines of another key are kept as they are. A cut-off line, or a record of this key in a chunk that is not
    finished under the current checks and retry limit, is left out (the chunk is generated again with the same seeds).
    """
    if not path.is_file():
        return {}, []
    batch_size, max_retries, checks = chunk_size(spec), spec.max_retries, asdict(spec.checks)
    records: dict[int, list[dict[str, Any]]] = {}
    other: list[str] = []
    lines = [line for line in read_text(path).split("\n") if line]  # not splitlines(): U+2028
    for number, line in enumerate(lines, start=1):
        try:
            record = parse_json(line, path, number)
        except SourceError:  # a line cut off by an interruption
            continue
        row = record.get("row") if isinstance(record, dict) else None
        if not isinstance(record, dict) or record.get("key") != key:
            other.append(line)
        elif isinstance(row, int) and 0 <= row < len(questions):
            records.setdefault(row, []).append(judge(record, questions[row], checks))
    for attempts in records.values():  # a lower retry limit keeps the attempts an uninterrupted run would make
        attempts.sort(key=lambda r: int(r["attempt"]))
        del attempts[max_retries + 1 :]
    kept: dict[int, list[dict[str, Any]]] = {}
    for start in range(0, len(questions), batch_size):
        chunk = range(start, min(start + batch_size, len(questions)))
        if all(i in records and _finished(records[i], max_retries) for i in chunk):
            kept.update({i: records[i] for i in chunk})
    kept_lines = [json.dumps(r, ensure_ascii=False) for i in sorted(kept) for r in kept[i]]
    if other:
        log.info("%s: keeping %d line(s) of other generation settings", path, len(other))
    if len(other) + len(kept_lines) != len(lines):
        dropped = len(lines) - len(other) - len(kept_lines)
        log.warning("%s: discarding %d line(s) of unfinished chunks or cut off", path, dropped)
    return kept, other + kept_lines


def rewrite_raw(path: Path, lines: list[str]) -> None:
    """Replace the log with ``lines`` (a new file renamed into place), unless it already holds exactly them."""
    text = "".join(line + "\n" for line in lines)
    if read_text(path) == text if path.is_file() else not lines:
        return
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def _append(path: Path, records: list[dict[str, Any]]) -> None:
    with path.open("a", encoding="utf-8") as handle:
        handle.write("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
        handle.flush()
        os.fsync(handle.fileno())


def rephrase_chunk(
    generator: Generator, rows: list[dict[str, Any]], chunk: range, spec: RephraseConfig, key: str
) -> list[dict[str, Any]]:
    """Generate, parse and retry the rows of one chunk; return one record per generation."""
    records: list[dict[str, Any]] = []
    pending, checks = list(chunk), asdict(spec.checks)
    for attempt in range(spec.max_retries + 1):
        if not pending:
            break
        questions = [question_of(rows[i]) for i in pending]
        seeds = [row_seed(spec.seed, i, attempt) for i in pending]
        generations = generator.generate([rephrase_messages(q) for q in questions], seeds)
        still = []
        for i, question, seed, generation in zip(pending, questions, seeds, generations, strict=True):
            record = {"key": key, "row": i, "attempt": attempt, "seed": seed, "text": generation.text}
            record = judge(record | {"finish": generation.finish}, question, checks)
            records.append(record)
            if not record["accepted"]:
                still.append(i)
        pending = still
    return records


def outcome_of(attempts: list[dict[str, Any]]) -> Outcome:
    """A row's outcome from its records (the last attempt decides)."""
    last = attempts[-1]
    flags = tuple((str(a), str(b)) for a, b in last.get("flags") or ())
    return Outcome(last["rewrite"], last["reason"], last["detail"], len(attempts), flags)


def rephrase(cfg: DictConfig, generator: Generator | None = None) -> QualityReport:
    """Rephrase ``cfg.datasource``'s prepared parquet with ``cfg.rephrase``; write the outputs and the report.

    ``generator`` replaces the configured backend (tests pass a scripted one); by default it is built on first need.
    """
    datasource = section_of(cfg, DatasourceConfig)
    prepared = Path(datasource.output)
    if not prepared.is_file():
        raise SourceError(f"{prepared}: no such file (run: corewarding data prepare {datasource.name})")
    spec = check_rephrase(cfg, generating=True)
    rows = read_verl_rows(prepared)
    paths = RephrasePaths.beside(prepared)
    source = resolve_model_source(str(spec.model), cfg)
    questions = [question_of(r) for r in rows]
    key = run_key(spec, source, questions)
    batch_size = chunk_size(spec)
    records, log_lines = load_raw(paths.raw, key, questions, spec)
    chunks = [range(start, min(start + batch_size, len(rows))) for start in range(0, len(rows), batch_size)]
    todo = [chunk for chunk in chunks if not all(i in records for i in chunk)]
    if todo and generator is None:
        check_backend(spec)  # before the log is rewritten: a backend that cannot run here changes nothing
    rewrite_raw(paths.raw, log_lines)
    for chunk in todo:
        if generator is None:
            generator = make_generator(spec, source)
        new = rephrase_chunk(generator, rows, chunk, spec, key)
        _append(paths.raw, new)
        for record in new:
            records.setdefault(record["row"], []).append(record)
        log.info("rephrased rows %d-%d of %d", chunk.start, chunk.stop - 1, len(rows))
    outcomes = [outcome_of(records[i]) for i in range(len(rows))]
    report = QualityReport(datasource.name, "rephrase", datasource.split, str(prepared), "")
    report.output = str(paths.rephrased)
    report.extra.update(
        generations=sum(len(v) for v in records.values()),
        rejections_per_attempt=dict(Counter(r["reason"] for v in records.values() for r in v if not r["accepted"])),
        accepted_on_attempt=dict(Counter(str(len(v) - 1) for v in records.values() if v[-1]["accepted"])),
        model=str(spec.model),
        backend=str(spec.backend),
        raw=str(paths.raw),
    )
    return write_outputs(rows, outcomes, paths, report, spec.on_failure)
