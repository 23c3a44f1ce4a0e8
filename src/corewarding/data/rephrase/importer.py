"""``corewarding data import-rephrased``: a released rephrasing -> the same aligned outputs, through the same checks.

Two release layouts are read: a pair file (idx, original_question, rephrased_question, solution, ..., as published
on the Hub as TMLR-Group-HF/Co-rewarding-Rephrased*) and a pair of aligned verl parquets (original + rewrite, as the
DAPO-14k copy ships).
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import asdict
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from corewarding.data.checks import check_rephrase, check_validate
from corewarding.data.fields import read_answer, read_question
from corewarding.data.quality import Candidate, QualityReport, validate
from corewarding.data.rephrase.outputs import Outcome, RephrasePaths, write_outputs
from corewarding.data.rephrase.parse import check_rewrite
from corewarding.data.sources import Records, columns_of, read_hub, read_local
from corewarding.files import SourceError
from corewarding.rows import ground_truth_of, make_row, question_of, read_verl_rows
from corewarding.schemas import DatasourceConfig, section_of

log = logging.getLogger(__name__)

PAIR_COLUMNS = ("original_question", "rephrased_question", "solution")


def rows_from_pairs(records: Records, source: str, split: str) -> tuple[list[dict[str, Any]], list[str]]:
    """Original verl rows and rephrased questions from a pair file; a missing column names the file."""
    present = set(columns_of(records))
    missing = [c for c in PAIR_COLUMNS if c not in present]
    if missing:
        raise SourceError(f"{source}: missing column(s) {', '.join(missing)} of a rephrasing pair file")
    rows, rewrites = [], []
    for i, record in enumerate(records):
        where = f"{source}: row {i}"
        question = read_question(record, "original_question", where) or ""
        rewrite = read_question(record, "rephrased_question", where) or ""
        index = record.get("idx")
        if index is None:
            index = i
        top = {k: record[k] for k in ("level", "type") if k in record and record[k] is not None}
        row = top | make_row(question, read_answer(record, "solution", "as_given", where), int(index), split)
        rows.append(row)
        rewrites.append(rewrite)
    return rows, rewrites


def rows_from_verl_pair(
    original: Records, rewrite: Records, sources: tuple[str, str]
) -> tuple[list[dict[str, Any]], list[str]]:
    """Original rows and rephrased questions from two aligned verl parquets (same length, same ground truths)."""
    if len(original) != len(rewrite):
        raise SourceError(f"{sources[1]}: {len(rewrite)} rows, but {sources[0]} has {len(original)}")
    rows, rewrites = [], []
    for i, (a, b) in enumerate(zip(original, rewrite, strict=True)):
        question = read_question(a, "prompt", f"{sources[0]}: row {i}")
        rephrased = read_question(b, "prompt", f"{sources[1]}: row {i}")
        gt_a = read_answer(a, "reward_model.ground_truth", "as_given", f"{sources[0]}: row {i}")
        gt_b = read_answer(b, "reward_model.ground_truth", "as_given", f"{sources[1]}: row {i}")
        if gt_a != gt_b:
            raise SourceError(f"{sources[1]}: row {i}: ground truth {gt_b!r} differs from the original's {gt_a!r}")
        row = {k: v for k, v in a.items() if k not in ("prompt", "reward_model", "extra_info", "data_source")}
        info = dict(a.get("extra_info") or {})
        row |= make_row(question or "", gt_a, int(info.pop("index", i)), str(info.pop("split", "train")), **info)
        rows.append(row)
        rewrites.append(rephrased or "")
    return rows, rewrites


def load_release(pairs: str | None, original: str | None, rewrite: str | None, hub_id: str | None, split: str):
    """Rows and rewrites from whichever release layout is given, and a label of the source."""
    if pairs:
        return (*rows_from_pairs(read_local(Path(pairs)), pairs, split), pairs)
    if original and rewrite:
        frames = read_local(Path(original)), read_local(Path(rewrite))
        return (*rows_from_verl_pair(*frames, (original, rewrite)), f"{original} + {rewrite}")
    if hub_id:
        label = f"hf://{hub_id}"
        return (*rows_from_pairs(read_hub(hub_id, None, "train"), label, split), label)
    raise SourceError("give --pairs FILE, or --original FILE --rewrite FILE (or set datasource.rephrased_release)")


def align_to_prepared(rows: list[dict[str, Any]], prepared: Path) -> tuple[list[dict[str, Any]], int]:
    """Replace each release row by the prepared row with the same question and answer (its index, level, extra
    columns); the release's own fields stay where no such row exists. Returns the rows and how many matched.

    A release numbers its pairs itself (OpenRS's ``idx`` runs 0..6998 after the source dropped a row), so the
    prepared set is the better source of a row's identity. Repeated rows (the same question and answer, kept by
    default) match their prepared copies in order, so each keeps its own index.
    """
    if not prepared.is_file():
        log.warning("%s is not prepared: the release's own index and fields are kept", prepared)
        return rows, 0
    by_key: dict[tuple[str, str | None], deque[dict[str, Any]]] = {}
    for row in read_verl_rows(prepared):
        by_key.setdefault((question_of(row), ground_truth_of(row)), deque()).append(row)
    aligned = []
    for row in rows:
        copies = by_key.get((question_of(row), ground_truth_of(row)))
        aligned.append(copies.popleft() if copies else row)
    return aligned, sum(a is not r for a, r in zip(aligned, rows, strict=True))


def release_paths(cfg: DictConfig) -> RephrasePaths:
    """Where an imported release goes: ``datasource.release_dir`` (kept apart from a generated rephrasing, so
    both can exist and ``dataset.rephrased_source`` picks one), or beside the prepared set when it is unset."""
    datasource = section_of(cfg, DatasourceConfig)
    output = Path(datasource.output)
    folder = datasource.release_dir
    return RephrasePaths.beside(Path(folder) / output.name if folder else output)


def import_rephrased(
    cfg: DictConfig, pairs: str | None = None, original: str | None = None, rewrite: str | None = None
) -> QualityReport:
    """Validate a released rephrasing like a prepared set, check its rewrites with ``cfg.rephrase.checks``, and
    write the aligned outputs of ``cfg.datasource``."""
    checks = check_validate(cfg)
    spec = check_rephrase(cfg, generating=False)
    datasource = section_of(cfg, DatasourceConfig)
    hub_id = None if (pairs or original) else datasource.rephrased_release
    rows, rewrites, source = load_release(pairs, original, rewrite, hub_id, datasource.split)
    paths = release_paths(cfg)
    report = QualityReport(datasource.name, "import-rephrased", datasource.split, source, "")
    report.output = str(paths.rephrased)
    # The same row checks as `data prepare` (no tokenizer here: prompt lengths are checked at prepare and training).
    rewrite_of = {id(row): text for row, text in zip(rows, rewrites, strict=True)}
    candidates = [Candidate(i, row, question_of(row), ground_truth_of(row)) for i, row in enumerate(rows)]
    drop = [r for r in checks.drop if r != "prompt_too_long"]
    kept = validate(candidates, report, drop)
    kept_rewrites = [rewrite_of[id(row)] for row in kept]
    aligned, matched = align_to_prepared(kept, Path(datasource.output))
    report.extra["matched_prepared_rows"] = matched
    outcomes, rewrite_checks = [], asdict(spec.checks)
    for row, text in zip(aligned, kept_rewrites, strict=True):
        verdict = check_rewrite(question_of(row), text, rewrite_checks)
        outcomes.append(Outcome(verdict.rewrite, verdict.reason, verdict.detail, 1, verdict.flags))
    return write_outputs(aligned, outcomes, paths, report, spec.on_failure)
