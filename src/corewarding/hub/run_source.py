"""Read what publishing needs from a training run folder ``runs/<cell_id>/``.

``config.yaml`` (the run's resolved config), ``run.json`` (code version, config hash, data hashes), ``metrics.jsonl``
(per-step training metrics) and the saved checkpoints: ``checkpoints/global_step_N/model`` (local backend) or
``checkpoints/global_step_N/actor`` (verl, merged once into ``hf/global_step_N``), found by the evaluation's rules
so that a step published is a step that can be evaluated.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from corewarding.evaluation.targets import hf_model_folder, saved_checkpoints, select_steps
from corewarding.hub.errors import PublishInputError
from corewarding.matrix import DEFAULT_HUB_ORG, Cell, cell_from_config, parse_cell_id
from corewarding.run_folder import CONFIG, METRICS, RUN_RECORD, checkpoints_dir

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunSource:
    """One run folder, read once: its cell, config (as written and as plain values), record and saved steps."""

    run_dir: Path
    cell: Cell
    config: dict[str, Any]
    config_text: bytes
    record: dict[str, Any]
    saved: dict[int, Path]  # step -> checkpoints/global_step_N/{model,actor}

    @property
    def org(self) -> str:
        """The Hub organisation the run's config names (``hub.org``)."""
        return str((self.config.get("hub") or {}).get("org") or DEFAULT_HUB_ORG)

    @property
    def newest(self) -> int:
        return max(self.saved)

    def get(self, dotted: str, default: Any = None) -> Any:
        """A config value by dotted key (``grpo.kl_coef``), or ``default`` when any part is absent."""
        node: Any = self.config
        for part in dotted.split("."):
            if not isinstance(node, dict) or part not in node:
                return default
            node = node[part]
        return node


def resolve_run_dir(run: str, runs_dir: Path) -> Path:
    """A run folder given as a path, or as a cell id whose folder is ``{runs_dir}/{cell_id}``."""
    path = Path(run)
    if path.is_dir():
        return path
    try:
        parse_cell_id(run)
    except ValueError:
        raise PublishInputError(f"{path}: no such run folder (and {run!r} is not a cell id)") from None
    candidate = runs_dir / run
    if not candidate.is_dir():
        raise PublishInputError(f"{candidate}: no such run folder")
    return candidate


def _cell(run_dir: Path, config: dict[str, Any]) -> Cell:
    """The cell from the folder name (``method__base_model__dataset``), else from the config's option names."""
    try:
        return parse_cell_id(run_dir.name)
    except ValueError:
        pass
    try:
        return cell_from_config(config)
    except (KeyError, TypeError, ValueError):
        raise PublishInputError(
            f"{run_dir}: the folder name is not a cell id and {run_dir / CONFIG} lacks method/base_model/dataset names"
        ) from None


def load_run(run_dir: Path) -> RunSource:
    """Read a run folder; a missing folder, config or checkpoint is an error naming the path."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise PublishInputError(f"{run_dir}: no such run folder")
    config_path = run_dir / CONFIG
    if not config_path.is_file():
        raise PublishInputError(f"{config_path}: no such file (the run's resolved config)")
    text = config_path.read_bytes()
    try:
        config = OmegaConf.to_container(OmegaConf.create(text.decode()))
    except Exception as exc:  # omegaconf/yaml raise several types for a malformed file
        raise PublishInputError(f"{config_path}: not a readable config ({exc})") from exc
    if not isinstance(config, dict):
        raise PublishInputError(f"{config_path}: expected a mapping at the top level")
    saved = saved_checkpoints(checkpoints_dir(run_dir))
    if not saved:
        raise PublishInputError(
            f"{checkpoints_dir(run_dir)}: no saved checkpoint (global_step_N/model or global_step_N/actor)"
        )
    plain = {str(k): v for k, v in config.items()}
    return RunSource(
        run_dir,
        _cell(run_dir, plain),
        plain,
        text,
        read_optional_json(
            run_dir / RUN_RECORD, "no run record; the card's provenance will lack the code version and data hashes"
        ),
        saved,
    )


def read_optional_json(path: Path, missing: str) -> dict[str, Any]:
    """A JSON object the card draws on: ``{}`` with a warning (``missing`` says what the card lacks) when the file
    is absent; a malformed file is an error naming it."""
    if not path.is_file():
        log.warning("%s: %s", path, missing)
        return {}
    try:
        value = json.loads(path.read_text())
    except ValueError as exc:
        raise PublishInputError(f"{path}: not valid JSON ({exc})") from exc
    return value if isinstance(value, dict) else {}


def choose_steps(source: RunSource, steps: str) -> list[int]:
    """``last``, ``all`` or comma-separated step numbers, each of which must be saved."""
    try:
        return select_steps(sorted(source.saved), steps)
    except (FileNotFoundError, ValueError) as exc:
        raise PublishInputError(f"{checkpoints_dir(source.run_dir)}: {exc}") from exc


def model_folder(source: RunSource, step: int) -> Path:
    """A transformers folder with the weights of ``step`` (a verl checkpoint is merged into ``hf/`` first)."""
    if step not in source.saved:
        raise PublishInputError(
            f"{checkpoints_dir(source.run_dir)}: no checkpoint for step {step}; saved steps: {sorted(source.saved)}"
        )
    return hf_model_folder(source.run_dir, step, source.saved[step])


def training_rows(source: RunSource, step: int) -> list[dict[str, Any]]:
    """The training log's rows up to and including ``step`` (``metrics.jsonl``; empty when there is none)."""
    path = source.run_dir / METRICS
    if not path.is_file():
        return []
    rows = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise PublishInputError(f"{path}:{number}: not valid JSON ({exc})") from exc
        if isinstance(row, dict) and isinstance(row.get("step"), int) and row["step"] <= step:
            rows.append(row)
    return rows
