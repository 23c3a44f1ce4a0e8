"""The audit step of a cell: evaluate the checkpoint the paper released on the Hub, under the matrix's protocol.

The scores go to ``runs/<cell_id>/released/`` (``audit.json`` and an ``eval/`` laid out as a run's), apart from the
cell's own run. The first audit records the Hub commit it evaluated; later audits evaluate that same commit. A cell
audited under the same benchmarks and settings is skipped without contacting the Hub; a changed setting (a seed, a
backend) adds a second score beside the first (the units are kept per settings key). A Hub failure (a gated repo, a
missing revision, no network) ends this cell with one line; the pipeline goes on with the others.

A record is trusted only for the released checkpoint the matrix names: its cell, the repo id ``hub_repo_id(cell)``, a
full Hub commit as its revision, and evaluation units generated from that ``repo@commit``. Anything else (a record
copied from another cell, edited to name another repository or a made-up revision) is audited again from the Hub, with
one line saying why, and never skipped or pinned. A re-audit that fails (``--force`` during a Hub outage) keeps a
finished audit's record and scores as they were and writes the failure beside it, ``last_failure.json``.
"""

from __future__ import annotations

import json
import logging
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from corewarding.evaluation.eval_config import benchmark_configs, configs_sha256, expand_benchmarks
from corewarding.evaluation.targets import Target, resolve_hub_model
from corewarding.files import write_json_atomic
from corewarding.matrix import hub_repo_id
from corewarding.pipeline.cells import CellPlan
from corewarding.pipeline.run_summary import AUDIT_STEP
from corewarding.pipeline.steps import StepResult
from corewarding.results.ingest.released import AuditRecordError, ReleasedRecord, read_record
from corewarding.run_folder import AUDIT_FAILURE, AUDIT_RECORD, released_dir

log = logging.getLogger(__name__)


class ReleasedUnavailable(RuntimeError):
    """The released checkpoint cannot be fetched from the Hub (one line: the repo, the revision, why)."""


class AuditFailed(RuntimeError):
    """Some benchmarks of the audit failed (the others are kept)."""


class ReauditFailed(RuntimeError):
    """A re-audit failed; the finished audit before it is kept (one line: why, and which audit is kept)."""


COMMIT = re.compile(r"[0-9a-f]{40}")  # a Hub revision as an audit pins it: the full commit id


def hub_problem(exc: BaseException) -> str:
    """Why a Hub download failed, in words a user can act on."""
    from huggingface_hub import errors  # huggingface_hub: imported when used

    if isinstance(exc, errors.GatedRepoError):
        return "a gated repository: accept its terms on the Hub, then set HF_TOKEN"
    if isinstance(exc, errors.RevisionNotFoundError):
        return "no such revision in the repository"
    if isinstance(exc, errors.RepositoryNotFoundError):
        return "no such repository (or a private one: set HF_TOKEN)"
    if isinstance(exc, errors.OfflineModeIsEnabled | errors.LocalEntryNotFoundError):
        return "the Hub cannot be reached (no network, or HF_HUB_OFFLINE=1) and the files are not cached"
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


def fetch_released(repo_id: str, revision: str | None) -> tuple[str, str]:
    """The local snapshot folder of ``repo_id`` at ``revision`` (None: its main branch) and its commit."""
    try:
        return resolve_hub_model(repo_id, revision)
    except FileNotFoundError as exc:  # every Hub failure ends this checkpoint with one line, not a traceback
        cause = exc.__cause__ or exc
        raise ReleasedUnavailable(f"{repo_id}@{revision or 'main'}: {hub_problem(cause)}") from None


def _previous(folder: Path) -> ReleasedRecord | None:
    if not (folder / AUDIT_RECORD).is_file():
        return None
    try:
        return read_record(folder)
    except AuditRecordError as exc:
        log.warning("%s; auditing again", exc)
        return None


def record_problem(record: ReleasedRecord, plan: CellPlan) -> str | None:
    """Why ``record`` is not a record of the released checkpoint the matrix names for the cell (another cell, another
    repository, a revision that is not a full Hub commit); None when it is."""
    cell = plan.cell
    named = (record.cell_id, record.method, record.base_model, record.dataset)
    if named != (cell.cell_id, cell.method, cell.base_model, cell.dataset):
        return f"it is the record of cell {record.cell_id}, not {cell.cell_id}"
    repo_id = hub_repo_id(cell)
    if record.hub_repo_id != repo_id:
        return f"it names {record.hub_repo_id}, the matrix names {repo_id}"
    if record.revision is not None and not COMMIT.fullmatch(str(record.revision)):
        return f"its revision {record.revision!r} is not a Hub commit"
    return None


def evaluated_revisions(folder: Path) -> set[str]:
    """The ``repo@commit`` every evaluation unit under ``folder``'s ``eval/units`` generated from."""
    found = set()
    for path in sorted((folder / "eval" / "units").rglob("generation.json")):
        try:
            found.add(str(json.loads(path.read_text(encoding="utf-8")).get("model_revision")))
        except (OSError, ValueError, AttributeError) as exc:
            log.warning("%s: unreadable (%s); not counted as evaluated", path, exc)
    return found


def scores_problem(record: ReleasedRecord, folder: Path) -> str | None:
    """Why the scores in ``folder`` are not those of the finished ``record``'s checkpoint: no revision, or no evaluation
    unit generated from its ``repo@revision``; None when some are."""
    if record.revision is None:
        return "it records no revision"
    evaluated = f"{record.hub_repo_id}@{record.revision}"
    if evaluated not in evaluated_revisions(folder):
        return f"no evaluation unit in {folder / 'eval'} was generated from {evaluated}"
    return None


def audit_cell(plan: CellPlan, benchmarks: str | None = None, force: bool = False) -> StepResult:
    """Evaluate the cell's released checkpoint on ``benchmarks`` (None: the matrix's) with the matrix's evaluation
    overrides and this run's; skipped when its record is of the matrix's checkpoint and was audited with the same
    benchmarks and settings; a failed re-audit of a finished one raises ReauditFailed and keeps it."""
    from corewarding.evaluation.harness import evaluate_targets  # pyarrow: imported when used

    cell = plan.cell
    names = expand_benchmarks(benchmarks or plan.matrix.eval_benchmarks)
    configs = benchmark_configs(names, plan.evaluation_overrides())
    stamp = configs_sha256(configs)  # one config per benchmark: the benchmarks and every resolved setting
    folder = released_dir(plan.run_dir)
    repo_id = hub_repo_id(cell)
    previous = _previous(folder)
    identity = record_problem(previous, plan) if previous else None
    finished = previous if previous and previous.status == "done" and identity is None else None
    distrusted = identity or (scores_problem(finished, folder) if finished else None)
    if distrusted:
        log.warning("%s: %s; auditing %s again from the Hub", folder / AUDIT_RECORD, distrusted, repo_id)
    elif not force and finished and finished.settings_sha256 == stamp:
        return StepResult(plan.cell_id, AUDIT_STEP, "skipped", {"reason": "audited with these settings"})
    kept = None if distrusted else finished  # a finished audit a failed re-audit leaves as it was
    pinned = previous.revision if previous and not distrusted else None  # the commit an earlier audit pinned
    record = ReleasedRecord(cell.cell_id, cell.method, cell.base_model, cell.dataset, repo_id, revision=pinned,
                            benchmarks=names)  # fmt: skip
    folder.mkdir(parents=True, exist_ok=True)
    try:
        model_path, commit = fetch_released(repo_id, pinned)
        record.revision = commit
        target = Target(None, model_path, f"{repo_id}@{commit}")
        outcomes = evaluate_targets([target], configs, folder, keep_settings=True)
        failed = [f"{o.benchmark}: {o.message}" for o in outcomes if o.status == "failed"]
        if failed:
            raise AuditFailed(f"{plan.cell_id}: {len(failed)} benchmark(s) failed: {'; '.join(failed)}")
    except Exception as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if kept is None:
            _finish(record, folder, "failed", reason)
            raise
        raise ReauditFailed(_keep(kept, folder, f"{type(exc).__name__}: {reason}", stamp)) from exc
    record.settings_sha256 = stamp
    record.throughput = measured_throughput(outcomes, str(configs[0].generation.backend)) or (
        kept.throughput if kept else None
    )
    _finish(record, folder, "done", None)
    (folder / AUDIT_FAILURE).unlink(missing_ok=True)  # an earlier failed re-audit is superseded
    counts = {status: sum(o.status == status for o in outcomes) for status in sorted({o.status for o in outcomes})}
    return StepResult(plan.cell_id, AUDIT_STEP, "done", {"revision": f"{repo_id}@{commit}", "units": counts})


def _keep(kept: ReleasedRecord, folder: Path, reason: str, stamp: str) -> str:
    """Write the failed re-audit to ``last_failure.json`` beside the finished audit ``kept`` (left as it was); the
    line to report."""
    failure = {
        "failed_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "error": reason,
        "hub_repo_id": kept.hub_repo_id,
        "revision": kept.revision,
        "settings_sha256": stamp,
    }
    write_json_atomic(failure, folder / AUDIT_FAILURE)
    return (
        f"{reason}; the audit of {kept.hub_repo_id}@{kept.revision} of {kept.audited_at} and its scores are kept, "
        f"this failure is in {folder / AUDIT_FAILURE}"
    )


def measured_throughput(outcomes: list[Any], backend: str) -> dict[str, Any] | None:
    """Samples, tokens and generation seconds of the units generated now (None when nothing was generated)."""
    generated = [o for o in outcomes if o.status == "evaluated" and o.timing.get("generation_seconds")]
    if not generated:
        return None
    return {
        "backend": backend,
        "samples": sum(int(o.counts.get("samples", 0)) for o in generated),
        "tokens": sum(int(o.counts.get("generated_tokens", 0)) for o in generated),
        "seconds": round(sum(float(o.timing["generation_seconds"]) for o in generated), 3),
    }


def _finish(record: ReleasedRecord, folder: Path, status: str, error: str | None) -> None:
    record.status, record.error = status, error
    record.audited_at = datetime.now(UTC).isoformat(timespec="seconds")
    record.write(folder)
