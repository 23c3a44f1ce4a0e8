"""The checkpoint matrix: cells, and every name derived from a cell (the only place names are made)."""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from corewarding.config import ConfigError, config_dir, load_group_option, load_methods, shown_path
from corewarding.yaml_bounds import read_yaml

DEFAULT_HUB_ORG = "TMLR-Group-HF"


SEED_KEY = "seed_index"  # the config key a seed cell adds (absent: seed 0, so seed 0's config is today's)
SEED_TAG = re.compile(r"^seed([1-9][0-9]*)$")
# The one rule for a name that becomes a cell id, a folder name and a store key, wherever it comes from (a matrix
# file, a run folder's config.yaml, an audit record): ASCII letters and digits, then also _ . @ + = -. No bidi
# control, zero-width character or look-alike letter can pass.
PLAIN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.@+=-]*")
PLAIN_NAME_RULE = "ASCII letters, digits and _ . @ + = - (not first: . @ + = -)"


def is_plain_name(name: str) -> bool:
    """Whether ``name`` keeps to ``PLAIN_NAME``.

    >>> [is_plain_name(n) for n in ("gt_grpo__tiny__tiny", "gt_grp\\u043e", "a\\u202eb", "a\\u200b", "-a", "a\\n")]
    [True, False, False, False, False, False]
    """
    return PLAIN_NAME.fullmatch(name) is not None


@dataclass(frozen=True, order=True)
class Cell:
    """One training run of the matrix: a method on a base model and a dataset, and which of the cell's seeds (0, the
    default, is the cell's first and only run unless the matrix asks for more)."""

    method: str
    base_model: str
    dataset: str
    seed: int = 0

    @property
    def cell_id(self) -> str:
        """A stable, filesystem-safe id, e.g. ``co_rewarding_2__qwen3-8b-base__dapo14k``; seed k > 0 adds
        ``__seed<k>``, so seed 0 keeps the id (and run folder, store rows and Hub id) it always had."""
        base = f"{self.method}__{self.base_model}__{self.dataset}"
        return f"{base}__seed{self.seed}" if self.seed else base

    @property
    def first_seed(self) -> Cell:
        """The cell's seed 0: what a cell's seeds are grouped under."""
        return Cell(self.method, self.base_model, self.dataset)

    def overrides(self) -> list[str]:
        """Hydra overrides that select this cell's config options; seed k > 0 also moves the run's RNG seed and the
        method's data-order seed by k (``seed_overrides``)."""
        base = [f"method={self.method}", f"base_model={self.base_model}", f"dataset={self.dataset}"]
        return base + seed_overrides(self.method, self.seed)

    def to_dict(self) -> dict[str, str | int]:
        return asdict(self)


def seed_overrides(method: str, seed: int) -> list[str]:
    """``+seed_index=k``, ``seed=<configs/config.yaml's seed + k>`` and ``method.data_seed=<the method's + k>`` for
    seed k > 0; nothing for seed 0."""
    if seed == 0:
        return []
    root = OmegaConf.load(config_dir() / "config.yaml")
    base_seed = int(OmegaConf.select(root, "seed", default=0))  # raw read: a root key of config.yaml, not composed
    overrides = [f"+{SEED_KEY}={seed}", f"seed={base_seed + seed}"]
    data_seed = load_group_option("method", method).method.get("data_seed")
    return overrides + ([f"method.data_seed={int(data_seed) + seed}"] if data_seed is not None else [])


def cell_from_config(config: Any) -> Cell:
    """The cell a composed config (or a run folder's config.yaml, read as a mapping) trains: its method, base model
    and data set names, and its ``seed_index`` (absent: seed 0). Raises KeyError/TypeError for a config without the
    names and ValueError for a seed that is not a whole number >= 0."""
    seed = config.get(SEED_KEY, 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"{SEED_KEY}={seed!r}: must be a whole number >= 0")
    names = (str(config["method"]["name"]), str(config["base_model"]["name"]), str(config["dataset"]["name"]))
    return Cell(*names, seed)


def parse_cell_id(cell_id: str) -> Cell:
    """Inverse of ``Cell.cell_id``."""
    parts = cell_id.split("__")
    seed = SEED_TAG.match(parts[-1]) if len(parts) == 4 else None
    if not (len(parts) == 3 or seed) or not all(parts):
        raise ValueError(f"not a cell id (method__base_model__dataset[__seedK]): {cell_id!r}")
    method, base_model, dataset = parts[:3]
    return Cell(method, base_model, dataset, int(seed.group(1)) if seed else 0)


def _hub_name(group: str, option: str) -> str:
    """The option's ``hub_name``; a KeyError of one line naming its file when it has none (a reader that only needs
    names, such as ingestion, takes it as no repo id)."""
    name = OmegaConf.select(load_group_option(group, option), f"{group}.hub_name")  # raw read: one key of one file
    if not name:
        raise KeyError(f"{shown_path(config_dir() / group / f'{option}.yaml')}: {group}.hub_name: missing")
    return str(name)


def hub_repo_id(cell: Cell, org: str = DEFAULT_HUB_ORG) -> str:
    """The Hub repo of a cell's checkpoint: ``{org}/{Method}-{Model}-{Set}``.

    >>> hub_repo_id(Cell("co_rewarding_2", "qwen3-8b-base", "dapo14k"))
    'TMLR-Group-HF/Co-rewarding-II-Qwen3-8B-Base-DAPO14k'
    """
    method = _hub_name("method", cell.method)
    model = _hub_name("base_model", cell.base_model)
    dataset = _hub_name("dataset", cell.dataset)
    return f"{org}/{method}-{model}-{dataset}" + (f"-seed{cell.seed}" if cell.seed else "")


def check_methods(cells: Sequence[Cell]) -> None:
    """Read each method the cells train as the dry run reads it (``config.load_methods``): a ConfigError of one line
    naming the first method file and key that cannot work, before anything is listed or run."""
    load_methods(list(dict.fromkeys(cell.method for cell in cells)))


def run_dir(cell: Cell, runs_dir: str | Path = "runs") -> Path:
    """Where a cell's checkpoints, metrics and resolved config live."""
    return Path(runs_dir) / cell.cell_id


@dataclass(frozen=True)
class Matrix:
    """A named list of cells plus the Hydra overrides every cell of it shares.

    ``train_overrides`` apply when the pipeline trains a cell (e.g. ``backend=verl``), not to the config snapshots;
    ``eval_benchmarks`` and ``eval_overrides`` say how the pipeline evaluates every saved step of a cell.
    """

    name: str
    cells: tuple[Cell, ...]
    overrides: tuple[str, ...] = ()
    train_overrides: tuple[str, ...] = ()
    eval_benchmarks: str = "paper"
    eval_overrides: tuple[str, ...] = ()

    def cell(self, cell_id: str) -> Cell:
        """The cell of this matrix with ``cell_id``; an unknown id is an error naming the matrix."""
        for cell in self.cells:
            if cell.cell_id == cell_id:
                return cell
        raise KeyError(
            f"cell {cell_id!r} is not in matrix {self.name!r} (corewarding matrix list --matrix {self.name})"
        )


def matrix_names() -> list[str]:
    """Every matrix file's name (``configs/matrix/*.yaml``), sorted."""
    return sorted(p.stem for p in (config_dir() / "matrix").glob("*.yaml"))


def matrix_of(cell_ids: Sequence[str]) -> str | None:
    """The matrix the cells belong to: the one holding most of them, of those the smallest (its cells least often
    not run); None when no matrix holds any."""
    wanted = set(cell_ids)
    best: tuple[int, int, str] | None = None
    for name in matrix_names():
        ids = {c.cell_id for c in load_matrix(name).cells}
        key = (-len(wanted & ids), len(ids), name)
        if key[0] < 0 and (best is None or key < best):
            best = key
    return best[2] if best else None


def did_you_mean(name: str, known: Sequence[str]) -> str:
    """``"; did you mean X?"`` for the known name closest to a misspelt ``name``, or ``""`` when none is close."""
    close = difflib.get_close_matches(name, known, n=1)
    return f"; did you mean {close[0]}?" if close else ""


def _matrix_path(name: str) -> Path:
    path = config_dir() / "matrix" / f"{name}.yaml"
    if not path.is_file():
        known = matrix_names()
        raise KeyError(f"unknown matrix {name!r}{did_you_mean(name, known)} (known: {', '.join(known)})")
    return path


def _read_raw(name: str, seen: tuple[str, ...] = ()) -> tuple[Path, dict[Any, Any]]:
    """A matrix file as a mapping; with ``extends: <matrix>`` the base's cells come first and its other sections
    apply unless this file sets them."""
    path = _matrix_path(name)
    raw = read_yaml(path, ConfigError)  # bounded: refuses an alias bomb or a huge file in one line
    if isinstance(raw, dict):
        raw = OmegaConf.to_container(OmegaConf.create(raw))  # OmegaConf's checks of keys, as OmegaConf.load did
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: a matrix file is a mapping (name, cells, ...)")
    base_name = raw.pop("extends", None)
    if base_name is None:
        return path, raw
    if not isinstance(base_name, str) or base_name in (*seen, name):
        raise ValueError(f"{path}: extends must name another matrix, not {base_name!r} (no cycles)")
    _, base = _read_raw(base_name, (*seen, name))
    merged = {**base, **raw, "cells": [*(base.get("cells") or []), *(raw.get("cells") or [])]}
    return path, merged


def load_matrix(name: str = "paper") -> Matrix:
    """Load ``configs/matrix/{name}.yaml`` (and the matrix it extends) and check every cell names existing config
    options."""
    path, raw = _read_raw(name)
    _check_keys(path, "", raw, {"name", "cells", "overrides", "training", "evaluation", "seeds", "select"})
    default_seeds = _seeds(path, "seeds", raw.get("seeds", 1))
    select = _section(path, raw, "select", {"methods", "base_models", "datasets"})
    cells: list[Cell] = []
    checked: set[tuple[str, str]] = set()  # each option file read once, not once per cell naming it
    for i, entry in enumerate(raw.get("cells") or []):
        missing = {"method", "base_model", "dataset"} - set(entry)
        if missing:
            raise ValueError(f"{path}: cell {i} lacks {', '.join(sorted(missing))}")
        _check_keys(path, f"cells[{i}].", entry, {"method", "base_model", "dataset", "seeds"})
        cell = Cell(str(entry["method"]), str(entry["base_model"]), str(entry["dataset"]))
        if not is_plain_name(cell.cell_id):
            raise ConfigError(f"{path}: cell {i} ({cell.cell_id!r}) is not a plain name ({PLAIN_NAME_RULE})")
        for group in ("method", "base_model", "dataset"):
            if (group, getattr(cell, group)) not in checked:
                load_group_option(group, getattr(cell, group))  # raises with the known options
                checked.add((group, getattr(cell, group)))
        if not _selected(cell, select):
            continue
        seeds = _seeds(path, f"cells[{i}].seeds", entry.get("seeds", default_seeds))
        cells += [Cell(cell.method, cell.base_model, cell.dataset, seed) for seed in range(seeds)]
    if len(set(cells)) != len(cells):
        raise ValueError(f"{path}: duplicate cells")
    training = _section(path, raw, "training", {"overrides"})
    evaluation = _section(path, raw, "evaluation", {"benchmarks", "overrides"})
    benchmarks = evaluation.get("benchmarks", "paper")
    if not isinstance(benchmarks, str):
        raise ValueError(f"{path}: evaluation.benchmarks must be a comma-separated string, e.g. 'math500,amc'")
    return Matrix(
        str(raw.get("name", name)),
        tuple(cells),
        _strings(path, "overrides", raw.get("overrides")),
        train_overrides=_strings(path, "training.overrides", training.get("overrides")),
        eval_benchmarks=benchmarks,
        eval_overrides=_strings(path, "evaluation.overrides", evaluation.get("overrides")),
    )


def _seeds(path: Path, key: str, value: object) -> int:
    """How many seeds a cell runs: a whole number >= 1 (seed 0 is the cell's first run)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{path}: {key}={value!r} must be a whole number >= 1")
    return value


def _selected(cell: Cell, select: dict[Any, Any]) -> bool:
    """Whether ``select`` (a named selection: methods, base_models, datasets; an absent list selects all) keeps
    the cell."""
    return all(not select.get(f"{axis}s") or getattr(cell, axis) in select[f"{axis}s"] for axis in
               ("method", "base_model", "dataset"))  # fmt: skip


def _check_keys(path: Path, where: str, section: dict[Any, Any], known: set[str]) -> None:
    unknown = set(section) - known
    if unknown:
        raise ValueError(f"{path}: unknown key(s) {', '.join(f'{where}{k}' for k in sorted(unknown))}")


def _section(path: Path, raw: dict[Any, Any], key: str, known: set[str]) -> dict[Any, Any]:
    """An optional mapping of a matrix file, its keys checked."""
    section = raw.get(key) or {}
    if not isinstance(section, dict):
        raise ValueError(f"{path}: {key} must be a mapping (with {', '.join(sorted(known))})")
    _check_keys(path, f"{key}.", section, known)
    return section


def _strings(path: Path, key: str, value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{path}: {key} must be a list of Hydra overrides (strings)")
    return tuple(value)


def select_cells(
    cells: tuple[Cell, ...] | list[Cell],
    methods: list[str] | None = None,
    base_models: list[str] | None = None,
    datasets: list[str] | None = None,
    cell_ids: list[str] | None = None,
) -> list[Cell]:
    """Filter cells by any of method, base model, dataset or cell id (None: no filter)."""
    return [
        c
        for c in cells
        if (not methods or c.method in methods)
        and (not base_models or c.base_model in base_models)
        and (not datasets or c.dataset in datasets)
        and (not cell_ids or c.cell_id in cell_ids)
    ]
