"""One configuration for a whole work pool: the parent's resolved config hash and code version travel with each cell
run, and a worker whose checkout gives another refuses the cell (it would train under its own config)."""

from __future__ import annotations

import hashlib
import subprocess
from functools import cache
from importlib import metadata
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


@cache
def packages_version() -> str:
    """SHA-256 (first 8 hex digits) of every installed distribution's ``name==version``, sorted: two environments
    with the same checkout but another torch, transformers or verl give different values."""
    names = sorted(
        {f"{(d.metadata['Name'] or '').lower()}=={d.version}" for d in metadata.distributions() if d.metadata["Name"]}
    )
    return hashlib.sha256("\n".join(names).encode()).hexdigest()[:8]


def code_version(root: Path) -> str:
    """``<commit>`` of the checkout at ``root``, with ``+<hash of the uncommitted changes of tracked files>`` when
    there are some, then ``/py-<hash of the installed packages' versions>``; ``unknown/py-...`` outside git."""
    commit = _git(root, "rev-parse", "HEAD")
    version = "unknown" if commit is None else commit.decode().strip()[:12]
    diff = _git(root, "diff", "HEAD", "--binary") if commit is not None else None
    if diff:
        version += "+" + hashlib.sha256(diff).hexdigest()[:12]
    return f"{version}/py-{packages_version()}"


def check_same(cell_id: str, wanted_config: str, wanted_code: str, config: str, code: str, where: str) -> None:
    """Raise VersionMismatch unless this checkout's config hash and code version are the parent's."""
    if wanted_config != config or wanted_code != code:
        raise VersionMismatch(
            f"{cell_id}: refused by the worker in {where}: parent config {wanted_config} code {wanted_code}, "
            f"this checkout config {config} code {code}"
        )
