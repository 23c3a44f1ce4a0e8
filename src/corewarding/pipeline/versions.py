"""One configuration for a whole work pool: the parent's resolved config hash and code version travel with each cell
run, and a worker whose checkout gives another refuses the cell (it would train under its own config)."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

from omegaconf import DictConfig, OmegaConf


class VersionMismatch(RuntimeError):
    """A worker's checkout differs from the parent's: its message is one line naming both versions."""


def config_hash(cfg: DictConfig) -> str:
    """SHA-256 (first 16 hex digits) of the cell's resolved training config as YAML."""
    return hashlib.sha256(OmegaConf.to_yaml(cfg, resolve=True).encode()).hexdigest()[:16]


def _git(root: Path, *args: str) -> bytes | None:
    try:
        done = subprocess.run(["git", *args], cwd=root, capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def code_version(root: Path) -> str:
    """``<commit>`` of the checkout at ``root``, with ``+<hash of the uncommitted changes of tracked files>`` when
    there are some; ``unknown`` outside git."""
    commit = _git(root, "rev-parse", "HEAD")
    if commit is None:
        return "unknown"
    version = commit.decode().strip()[:12]
    diff = _git(root, "diff", "HEAD", "--binary")
    if diff:
        version += "+" + hashlib.sha256(diff).hexdigest()[:12]
    return version


def check_same(cell_id: str, wanted_config: str, wanted_code: str, config: str, code: str, where: str) -> None:
    """Raise VersionMismatch unless this checkout's config hash and code version are the parent's (an empty wanted
    value is not checked: a job from an older parent)."""
    if (wanted_config and wanted_config != config) or (wanted_code and wanted_code != code):
        raise VersionMismatch(
            f"{cell_id}: refused by the worker in {where}: parent config {wanted_config} code {wanted_code}, "
            f"this checkout config {config} code {code}"
        )
