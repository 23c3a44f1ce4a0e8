"""The pipeline's per-cell steps as plain functions: train, evaluate every saved step, ingest, publish.

Each step skips what is already done, so a rerun of the pipeline only does the missing work: a run that finished
under the same training configuration is not retrained (an interrupted one resumes from its newest checkpoint), a
cell whose saved steps were all evaluated on the same benchmark settings is not re-evaluated, and so on.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from corewarding.files import disk_full
from corewarding.pipeline.cells import CellPlan
from corewarding.pipeline.dvc import DvcLockError
from corewarding.training import backend
from corewarding.training.common import accepted_config_hashes, training_config_hash
from corewarding.training.run_record import data_files, read_record

log = logging.getLogger(__name__)

SUPERSEDED = ".superseded"  # under the runs folder: runs moved aside because the cell's configuration changed


@dataclass(frozen=True)
class StepResult:
    """What one step did for one cell: ``done`` or ``skipped`` (with why), and its figures."""

    cell_id: str
    step: str
    status: str
    detail: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"cell_id": self.cell_id, "step": self.step, "status": self.status, **self.detail}


class EvaluationFailed(RuntimeError):
    """Some evaluation units of a cell failed (the others are kept)."""


# ---- train -------------------------------------------------------------------------------------------------------
def _config_hash(plan: CellPlan) -> str:
    return training_config_hash(plan.cfg)


def _contents(files: Any) -> dict[str, Any]:
    """Each data file's role and SHA-256: what it holds, not where it lies (a run moved with its data is the same)."""
    if not isinstance(files, dict):
        return {}
    return {role: entry.get("sha256") if isinstance(entry, dict) else entry for role, entry in files.items()}


def is_trained(plan: CellPlan) -> bool:
    """The run finished under the cell's current training configuration and on the same data files."""
    record = read_record(plan.run_dir)
    accepted = accepted_config_hashes(plan.cfg)  # the previous version's hash too, for one version
    if not (record and record.get("status") == "finished" and record.get("config_hash") in accepted):
        return False
    if _contents(record.get("data_files")) != _contents(data_files(plan.cfg)):
        log.info("%s: its data files changed since it was trained", plan.cell_id)
        return False
    return True


def supersede_run(plan: CellPlan) -> Path | None:
    """Move the cell's run aside when it is not to be resumed: trained under another configuration, or finished
    (a finished run is trained again only when forced or its data changed). Nothing is deleted; returns where it
    went, or None for no run or an interrupted one of this configuration."""
    record = read_record(plan.run_dir) or {}
    old = record.get("config_hash")
    if not old or not (old not in accepted_config_hashes(plan.cfg) or record.get("status") == "finished"):
        return None
    parent = plan.run_dir.parent / SUPERSEDED
    target = parent / f"{plan.cell_id}-{old}"
    suffix = 1
    while target.exists():
        suffix += 1
        target = parent / f"{plan.cell_id}-{old}-{suffix}"
    parent.mkdir(parents=True, exist_ok=True)
    os.replace(plan.run_dir, target)
    log.warning("%s: the earlier run was moved to %s (it is trained again)", plan.cell_id, target)
    return target


def train_cell(plan: CellPlan, force: bool = False) -> StepResult:
    """Train the cell (local or verl backend), resuming an interrupted run from its newest checkpoint.

    Skipped once finished under the same configuration and data; ``force`` (what ``dvc repro`` calls, once DVC has
    seen a dependency change) trains a finished run again, the earlier one moved aside.
    """
    if not force and is_trained(plan):
        return StepResult(plan.cell_id, "train", "skipped", {"reason": "finished under this configuration"})
    moved = supersede_run(plan)
    result = backend.train(plan.cfg, plan.run_dir, progress=False)
    steps = result.steps if isinstance(result, backend.RunResult) else None
    detail: dict[str, Any] = {"run_dir": str(plan.run_dir), "steps": steps}
    if moved:
        detail["superseded"] = str(moved)
    return StepResult(plan.cell_id, "train", "done", detail)


# ---- evaluate ----------------------------------------------------------------------------------------------------
def evaluate_cell(plan: CellPlan, force: bool = False) -> StepResult:
    """Evaluate every saved checkpoint step on the matrix's benchmarks; skipped when already done (unless forced)."""
    from corewarding.evaluation.run_eval import evaluate_run  # pyarrow: imported when used

    run = evaluate_run(plan.run_dir, plan.matrix.eval_benchmarks, plan.evaluation_overrides(), force)
    if run.skipped is not None:
        return StepResult(plan.cell_id, "evaluate", "skipped", {"reason": run.skipped})
    failed = [f"{o.step}/{o.benchmark}: {o.message}" for o in run.failed]
    if failed:
        raise EvaluationFailed(f"{plan.cell_id}: {len(failed)} evaluation unit(s) failed: {'; '.join(failed)}")
    outcomes = run.outcomes
    counts = {status: sum(o.status == status for o in outcomes) for status in sorted({o.status for o in outcomes})}
    return StepResult(plan.cell_id, "evaluate", "done", {"units": counts, "steps": run.steps})


# ---- ingest and publish ------------------------------------------------------------------------------------------
def ingest_cell(plan: CellPlan, db: Path) -> StepResult:
    """Load the cell's run folder into the DuckDB store (idempotent: unchanged files add nothing)."""
    from corewarding.results.ingest.ingestion import ingest  # duckdb: imported when used

    summary = ingest(db, run_dirs=[plan.run_dir])
    status = "done" if summary.changed else "skipped"  # skipped: every file was ingested before, unchanged
    flags = [flag.to_dict() for flag in summary.collapses]  # recorded first by this ingest: the pipeline's alerts
    return StepResult(plan.cell_id, "ingest", status, {"db": str(db), "rows": summary.rows, "collapses": flags})


def record_attempt(plan: CellPlan, db: Path, error: str | None, attempt: str | None, flow_run_id: str | None) -> None:
    """Record in the store that this attempt at the cell finished, or failed with ``error``, under the training config
    hash its runs are stored with: a failed attempt is never covered by the cell's older run."""
    from corewarding.results.ingest.attempts import FAILED, FINISHED, CellAttempt  # duckdb: imported when used
    from corewarding.results.ingest.attempts import record_attempt as store_attempt  # duckdb: imported when used

    status = FAILED if error else FINISHED
    record = CellAttempt(plan.cell_id, _config_hash(plan), status, error, attempt)
    store_attempt(record if flow_run_id is None else replace(record, attempt_id=flow_run_id), db)
    if error:
        log.info("%s: failed attempt recorded in %s (config %s)", plan.cell_id, db, record.config_hash)


def ingest_data_reports(db: Path, data_dir: Path) -> None:
    """Load the data stages' quality reports into the store (when the data folder exists)."""
    from corewarding.results.ingest.ingestion import ingest  # duckdb: imported when used

    if data_dir.is_dir():
        ingest(db, data_dirs=[data_dir])


def publish_cell(plan: CellPlan, push: bool, org: str | None = None, steps: str = "last") -> StepResult:
    """Build the cell's Hub folder (merged weights, tokenizer, model card) and push it when asked.

    Skipped when every folder was already built with this content and nothing needed uploading.
    """
    from corewarding.hub import publish_run  # huggingface_hub: imported when used

    results = publish_run(plan.run_dir, org=org or str(plan.cfg.hub.org), push=push, steps=steps)
    unchanged = all(r.folder.status == "unchanged" and not r.pushes for r in results)
    return StepResult(
        plan.cell_id, "publish", "skipped" if unchanged else "done", {"published": [r.summary() for r in results]}
    )


def is_transient(exc: BaseException | None) -> bool:
    """Worth a retry: a busy store or DVC lock, a dropped or refused connection, a server-side HTTP error. Never a
    full disk (ENOSPC, EDQUOT, EFBIG): it does not clear by itself, and another try only fills it again."""
    from corewarding.results.store.store import StoreBusyError  # duckdb: imported when used

    if exc is None or isinstance(exc, FileNotFoundError | PermissionError | NotADirectoryError | IsADirectoryError):
        return False
    if disk_full(exc):
        return False
    if isinstance(exc, StoreBusyError | DvcLockError | TimeoutError | ConnectionError):
        return True
    response = getattr(exc, "response", None)
    status = getattr(response, "status_code", None)
    if isinstance(status, int):
        return status >= 500 or status in (408, 429)
    return type(exc).__module__.startswith("httpx") or isinstance(exc, OSError)


def failure_text(exc: BaseException) -> str:
    """A step's error as the report words it; a full disk says so first (``disk full: OSError: [Errno 28] No space
    left on device: '<path>'``), so the one line names both what ran out and where."""
    text = f"{type(exc).__name__}: {exc}"
    return f"disk full: {text}" if disk_full(exc) else text
