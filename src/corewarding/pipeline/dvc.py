"""The pipeline's side of DVC: reproduce the data stages, list the cells in params.yaml, record finished stages.

``dvc.yaml`` has ``train@<cell_id>`` and ``evaluate@<cell_id>`` stages, a ``foreach`` over ``params.yaml: cells``.
The pipeline adds the cells it runs to that list, and after a cell trains and evaluates it runs ``dvc commit`` on
its two stages, so ``dvc status`` then reports them up to date and ``dvc repro`` alone reruns only what changed.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from corewarding.pipeline.cells import CellPlan, dvc_entry

log = logging.getLogger(__name__)


class DvcError(RuntimeError):
    """A dvc command failed; the message holds the command and the end of its output."""


def dvc_executable() -> str:
    """The ``dvc`` beside this interpreter (the project's venv), else the one on PATH."""
    beside = Path(sys.executable).parent / "dvc"
    found = str(beside) if beside.exists() else shutil.which("dvc")
    if not found:
        raise DvcError("dvc is not installed (pip install dvc)")
    return found


def is_dvc_repo(root: Path) -> bool:
    return (root / ".dvc").is_dir() and (root / "dvc.yaml").is_file()


def run_dvc(root: Path, *args: str, timeout: float | None = None) -> str:
    """Run ``dvc ARGS`` in ``root`` with the venv's executables on PATH; raise DvcError with its output on failure."""
    env = {**os.environ, "DVC_NO_ANALYTICS": "1", "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    cmd = [dvc_executable(), *args]
    done = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=timeout)
    output = done.stdout + done.stderr
    if done.returncode != 0:
        raise DvcError(f"`dvc {' '.join(args)}` in {root} failed (exit {done.returncode}):\n{output[-4000:]}")
    return output


def repro_stages(root: Path, stages: Sequence[str]) -> str:
    """``dvc repro STAGES`` (with their upstream stages); nothing to do when no stage is named."""
    if not stages:
        log.info("no data stage needed")
        return ""
    log.info("dvc repro %s", " ".join(stages))
    return run_dvc(root, "repro", *stages)


def _load_yaml(path: Path) -> Any:
    from ruamel.yaml import YAML

    if not path.is_file():
        return {}
    try:
        return YAML().load(path.read_text()) or {}
    except Exception as exc:  # ruamel raises many error types; each is a malformed file
        raise DvcError(f"{path}: not valid YAML: {exc}") from exc


def add_cells_to_params(params_file: Path, plans: Sequence[CellPlan]) -> bool:
    """Add (or update) the plans' entries in ``params_file: cells``; comments and other keys stay. True if written."""
    from ruamel.yaml import YAML

    data = _load_yaml(params_file)
    if not isinstance(data, dict):
        raise DvcError(f"{params_file}: expected a mapping with a 'cells' key")
    cells = data.setdefault("cells", {})
    if cells is None:
        cells = data["cells"] = {}
    if not isinstance(cells, dict):
        raise DvcError(f"{params_file}: 'cells' must map cell ids to their entries")
    changed = False
    for plan in plans:
        entry = dvc_entry(plan)
        if dict(cells.get(plan.cell_id) or {}) != entry:
            cells[plan.cell_id] = entry
            changed = True
    if changed:
        tmp = params_file.with_name(f".{params_file.name}.tmp")
        with tmp.open("w") as handle:
            YAML().dump(data, handle)
        tmp.replace(params_file)
        log.info("%s: listed %d cell(s) for dvc", params_file, len(plans))
    return changed


def record_stages(root: Path, cell_ids: Sequence[str]) -> list[str]:
    """``dvc commit`` the ``train@`` and ``evaluate@`` stages of finished cells; returns the stages recorded."""
    stages = [f"{kind}@{cell_id}" for cell_id in cell_ids for kind in ("train", "evaluate")]
    if stages:
        run_dvc(root, "commit", "--force", *stages)
        log.info("recorded in dvc.lock: %s", ", ".join(stages))
    return stages
