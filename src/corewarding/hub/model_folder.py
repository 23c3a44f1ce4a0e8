"""The folder uploaded for one checkpoint step of a run: weights, config and tokenizer (copied as saved), the model
card ``README.md``, ``training_config.yaml`` (the run's config, byte for byte), ``provenance.json`` and
``training_metrics.jsonl`` (the training log up to the step)."""

from __future__ import annotations

import json
import logging
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

from corewarding.evaluation.targets import HUB_FILES, folder_fingerprint
from corewarding.hub.errors import PublishInputError
from corewarding.hub.evals import StepEvals, read_eval_rows, step_evals
from corewarding.hub.folder import FolderPlan, PublishFolder, content_files, is_hidden, write_folder
from corewarding.hub.model_card import model_card
from corewarding.hub.paper import ARXIV_ID, PAPER_TITLE
from corewarding.hub.run_source import RunSource, load_run, model_folder, training_rows

log = logging.getLogger(__name__)

GENERATED = ("README.md", "training_config.yaml", "provenance.json", "training_metrics.jsonl")


def model_files(folder: Path) -> dict[str, Path]:
    """The files to publish from a transformers folder: weights (safetensors only), configs, tokenizer, template."""
    found = {
        p.relative_to(folder).as_posix(): p
        for p in sorted(folder.rglob("*"))
        if p.is_file() and any(fnmatch(p.name, pattern) for pattern in HUB_FILES)
    }
    found = {rel: p for rel, p in found.items() if not is_hidden(rel) and rel not in GENERATED}
    if "config.json" not in found or not any(rel.endswith(".safetensors") for rel in found):
        raise PublishInputError(f"{folder}: not a model folder with config.json and *.safetensors weights")
    return found


def _training_log(rows: list[dict[str, Any]], step: int) -> dict[str, Any]:
    """The logged metrics of ``step`` and the newest validation accuracy at or before it."""
    at_step: dict[str, Any] = next((r for r in reversed(rows) if r.get("step") == step), {})
    summary = {k: v for k, v in at_step.items() if k != "step_seconds"}
    validated = [r for r in rows if isinstance(r.get("val_accuracy"), int | float)]
    if validated:
        summary["val_accuracy"], summary["val_step"] = validated[-1]["val_accuracy"], validated[-1]["step"]
    return summary


def provenance(
    source: RunSource, step: int, repo_id: str, weights: str, evals: StepEvals, log_rows: list[dict[str, Any]]
) -> dict[str, Any]:
    """Where the published files come from (machine-readable; the card's Provenance section says the same)."""
    record = source.record
    saved = source.saved[step]
    checkpoint = saved.relative_to(source.run_dir).as_posix() + (" (merged with verl)" if saved.name == "actor" else "")
    data_files = {
        role: {"file": Path(str(d.get("path", ""))).name, "sha256": d.get("sha256")}
        for role, d in sorted((record.get("data_files") or {}).items())
        if isinstance(d, dict)
    }
    return {
        "repo_id": repo_id,
        "cell_id": source.cell.cell_id,
        "method": source.cell.method,
        "base_model": source.cell.base_model,
        "base_model_hf_id": source.get("base_model.hf_id"),
        "dataset": source.cell.dataset,
        "step": step,
        "checkpoint": checkpoint,
        "weights_fingerprint": weights,
        "backend": source.get("backend"),
        "code_version": record.get("code_version"),
        "config_hash": record.get("config_hash"),
        "data_files": data_files,
        "training_log": _training_log(log_rows, step),
        "evaluation": {
            "rows": len(evals.rows),
            "checkers": sorted({str(r["checker"]) for r in evals.rows}),
            "left_out_other_weights": evals.stale,
        },
        "paper": {"arxiv": ARXIV_ID, "title": PAPER_TITLE},
    }


def _json_bytes(value: Any) -> bytes:
    return (json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str) + "\n").encode()


def plan_step(source: RunSource, step: int, repo_id: str) -> FolderPlan:
    """Everything the folder of ``step`` will hold (the weights are merged first for a verl checkpoint)."""
    folder = model_folder(source, step)
    weights = folder_fingerprint(folder)
    evals = step_evals(read_eval_rows(source.run_dir), step, weights)
    log_rows = training_rows(source, step)
    facts = provenance(source, step, repo_id, weights, evals, log_rows)
    plan = FolderPlan(copies=model_files(folder))
    plan.texts["README.md"] = str(model_card(source, step, repo_id, evals, facts)).encode()
    plan.texts["training_config.yaml"] = source.config_text
    plan.texts["provenance.json"] = _json_bytes(facts)
    if log_rows:
        text = "".join(json.dumps(r, sort_keys=True) + "\n" for r in log_rows)
        plan.texts["training_metrics.jsonl"] = text.encode()
    return plan


def build_step_folder(source: RunSource, out: Path, *, repo_id: str, step: int | None = None) -> PublishFolder:
    """Build the folder of ``step`` (default: the newest saved step) of an already-read run at ``out``."""
    step = source.newest if step is None else step
    status, digest = write_folder(plan_step(source, step, repo_id), Path(out))
    return PublishFolder(Path(out), repo_id, "model", step, digest, tuple(content_files(Path(out))), status)


def build_model_folder(run_dir: Path, out: Path, *, repo_id: str, step: int | None = None) -> PublishFolder:
    """The exact folder that would be uploaded for one checkpoint step of ``run_dir`` (default: the newest).

    Written atomically; the same inputs give the same bytes, and an up-to-date folder is left untouched.
    """
    return build_step_folder(load_run(Path(run_dir)), Path(out), repo_id=repo_id, step=step)
