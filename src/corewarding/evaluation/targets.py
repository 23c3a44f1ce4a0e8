"""What gets evaluated: a model (Hub id or folder) or every saved checkpoint step of a run, with its revision.

A target's ``revision`` pins exactly which weights were evaluated: a Hub id resolves to its commit, a folder to a
fingerprint of its files (names, sizes and content hashes; files over 64 MiB hash their first and last MiB). A saved
step's signature (names, sizes and modification times: read without hashing a weight) says whether it was saved again.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from omegaconf import OmegaConf

from corewarding.checkpoint_manifest import MANIFEST, CheckpointError, manifest_problem
from corewarding.files import SourceError
from corewarding.run_folder import LOCAL_MODEL, checkpoints_dir, config_file, saved_checkpoints
from corewarding.training.backend import to_hf_folder
from corewarding.yaml_bounds import read_yaml

log = logging.getLogger(__name__)

HUB_FILES = ["*.json", "*.safetensors", "*.txt", "*.model", "*.tiktoken", "*.jinja"]
_WHOLE_FILE_LIMIT = 64 * 2**20
_EDGE = 2**20


@dataclass(frozen=True)
class Target:
    """One set of weights to evaluate: the checkpoint step it is (None: not a run checkpoint), where it loads from."""

    step: int | None
    model_path: str
    revision: str

    @property
    def label(self) -> str:
        return "base" if self.step is None else f"step_{self.step}"


def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    size = path.stat().st_size
    with path.open("rb") as handle:
        if size <= _WHOLE_FILE_LIMIT:
            digest.update(handle.read())
        else:
            digest.update(handle.read(_EDGE))
            handle.seek(size - _EDGE)
            digest.update(handle.read(_EDGE))
    return digest.hexdigest()


def folder_fingerprint(folder: Path) -> str:
    """A content fingerprint of a model folder (weights, config, tokenizer): ``sha256:<16 hex>``."""
    digest = hashlib.sha256()
    files = sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.startswith("."))
    if not files:
        raise FileNotFoundError(f"{folder}: an empty model folder")
    for path in files:
        rel = path.relative_to(folder).as_posix()
        digest.update(f"{rel}\0{path.stat().st_size}\0{_file_digest(path)}\n".encode())
    return "sha256:" + digest.hexdigest()[:16]


def resolve_hub_model(repo_id: str, revision: str | None = None) -> tuple[str, str]:
    """The local snapshot folder of a Hub model at ``revision`` (None: its main branch) and its commit (downloaded
    unless HF_HUB_OFFLINE=1 and cached); FileNotFoundError, caused by the Hub's own error, when it cannot be had."""
    from huggingface_hub import snapshot_download  # huggingface_hub: imported when used

    offline = os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false")
    try:
        folder = snapshot_download(repo_id, revision=revision, allow_patterns=HUB_FILES, local_files_only=offline)
    except Exception as exc:  # offline and not cached, unknown repo, network: all end the same way
        raise FileNotFoundError(f"model {repo_id!r}: not a local folder and not loadable from the Hub ({exc})") from exc
    return folder, Path(folder).name


def model_target(model: str, step: int | None = None) -> Target:
    """A target for a local model folder or a Hub id."""
    path = Path(model)
    if path.is_dir():
        return Target(step, str(path), folder_fingerprint(path))
    if path.exists() or model.startswith((".", "/")) or model.count("/") != 1:
        raise FileNotFoundError(f"model {model!r}: not a model folder and not a Hub id (org/name)")
    folder, commit = resolve_hub_model(model)
    return Target(step, folder, f"{model}@{commit}")


def hf_model_folder(run_dir: Path, step: int, saved: Path) -> Path:
    """A transformers-loadable folder for a saved step (a verl actor checkpoint is merged once, into hf/).

    A local checkpoint is checked against its manifest first: one whose files changed since it was written raises
    CheckpointError naming it; one without a manifest is evaluated with a warning that it is unverified."""
    if saved.name == LOCAL_MODEL:
        verify_local_checkpoint(saved.parent)
    return to_hf_folder(run_dir, step)


def verify_local_checkpoint(folder: Path) -> None:
    """Raise CheckpointError when ``folder``'s files differ from its manifest; warn when it has none."""
    if not (folder / MANIFEST).is_file():
        log.warning("%s has no %s: evaluating it unverified", folder, MANIFEST)
        return
    problem = manifest_problem(folder)
    if problem is not None:
        raise CheckpointError(f"{folder}: not evaluated, {problem} (the checkpoint changed after it was written)")


def select_steps(available: list[int], steps: str) -> list[int]:
    """``all``, ``last``, or a comma-separated list of steps (each must be saved)."""
    if steps == "all":
        return available
    if steps == "last":
        return available[-1:]
    try:
        wanted = [int(s) for s in steps.split(",") if s.strip()]
    except ValueError as exc:
        raise ValueError(f"--steps {steps!r}: expected all, last, or steps like 10,20") from exc
    missing = [s for s in wanted if s not in available]
    if missing:
        raise FileNotFoundError(f"no checkpoint for step(s) {missing}; saved steps: {available}")
    return wanted


def base_model_target(run_dir: Path) -> Target:
    """The run's base model (the "before RL" row), from its saved config."""
    from corewarding.lm.loading import (
        base_model_source,  # torch: imported when used
    )

    config = config_file(run_dir)
    if not config.is_file():
        raise FileNotFoundError(f"{config}: no such file (the base model is read from the run's config)")
    raw = read_yaml(config, SourceError)  # bounded: a run folder may come from another machine or the store
    if not isinstance(raw, dict):
        raise SourceError(f"{config}: not a mapping")
    return model_target(base_model_source(OmegaConf.create(raw)))


def checkpoint_signature(saved: Mapping[int, Path]) -> dict[str, str]:
    """Per saved step (``saved_checkpoints``), a digest of its files' names, sizes and modification times: a step
    saved again (a resumed or retrained run) gets a new signature, so its evaluation is redone."""
    signature = {}
    for step, folder in sorted(saved.items()):
        digest = hashlib.sha256()
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            stat = path.stat()
            digest.update(f"{path.relative_to(folder)}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
        signature[str(step)] = digest.hexdigest()[:16]
    return signature


def step_targets(run_dir: Path, saved: Mapping[int, Path], steps: str = "all") -> list[Target]:
    """The targets of a run's saved checkpoint steps (``saved_checkpoints``): ``all``, ``last`` or the listed ones."""
    targets = []
    for step in select_steps(sorted(saved), steps):
        folder = hf_model_folder(run_dir, step, saved[step])
        targets.append(Target(step, str(folder), folder_fingerprint(folder)))
    return targets


def run_targets(run_dir: Path, steps: str = "all", include_base: bool = False) -> list[Target]:
    """The targets of a run: its saved checkpoint steps (and its base model first, when asked)."""
    saved = saved_checkpoints(checkpoints_dir(run_dir))
    if not saved:
        raise FileNotFoundError(f"{checkpoints_dir(run_dir)}: no saved checkpoint (global_step_N/model or /actor)")
    base = [base_model_target(run_dir)] if include_base else []
    return base + step_targets(run_dir, saved, steps)
