"""Which cells a pipeline run covers, each cell's composed training config, and what it needs from DVC."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from omegaconf import DictConfig

from corewarding.config import ConfigError, load_group_option, needs_rephrased_view
from corewarding.matrix import Cell, Matrix, did_you_mean, is_plain_name, load_matrix, run_dir, select_cells
from corewarding.pipeline.compose_pool import compose_all, workers_for
from corewarding.schemas import DatasetConfig, PathsConfig, section_of

# The selection's facets: the Selection field, the Cell attribute it filters, and what an error calls it by default.
FACETS = (("methods", "method", "method"), ("base_models", "base_model", "base model"),
          ("datasets", "dataset", "dataset"), ("cells", "cell_id", "cell"))  # fmt: skip
SHOWN_NAMES = 24  # an error line lists at most this many valid names (paper_v3 has 72 cell ids)


@dataclass(frozen=True)
class Selection:
    """Cells chosen from a matrix by method, base model, dataset or cell id (an empty list does not filter)."""

    matrix: str = "demo"
    methods: tuple[str, ...] = ()
    base_models: tuple[str, ...] = ()
    datasets: tuple[str, ...] = ()
    cells: tuple[str, ...] = ()


@dataclass(frozen=True)
class CellPlan:
    """One selected cell: its matrix, the overrides it trains and evaluates with, and where it lives."""

    matrix: Matrix
    cell: Cell
    overrides: tuple[str, ...] = ()  # extra training overrides of this pipeline run
    eval_overrides: tuple[str, ...] = ()
    cfg: DictConfig = field(compare=False, repr=False, default=None)  # type: ignore[assignment]  # select_cells sets it

    @property
    def cell_id(self) -> str:
        return self.cell.cell_id

    @property
    def run_dir(self) -> Path:
        return run_dir(self.cell, section_of(self.cfg, PathsConfig).runs_dir)

    def train_overrides(self) -> list[str]:
        """Everything composed for training: matrix, its training overrides, the cell, then this run's."""
        return [*self.matrix.overrides, *self.matrix.train_overrides, *self.cell.overrides(), *self.overrides]

    def evaluation_overrides(self) -> list[str]:
        """The matrix's evaluation overrides, then this run's (``run_evaluation_overrides``)."""
        return [*self.matrix.eval_overrides, *self.run_evaluation_overrides()]

    def run_evaluation_overrides(self) -> list[str]:
        """This run's ``paths.*`` overrides (the roots share them), then its own evaluation overrides."""
        return [*path_overrides(self.overrides), *self.eval_overrides]


def path_overrides(overrides: Sequence[str]) -> list[str]:
    """The ``paths.*`` overrides, which the training and evaluation roots share."""
    return [o for o in overrides if o.lstrip("+").startswith("paths.")]


def selected_cells(matrix: Matrix, selection: Selection) -> list[Cell]:
    """The matrix's cells that the selection names (an empty facet selects every value of it)."""
    facets = (selection.methods, selection.base_models, selection.datasets, selection.cells)
    return select_cells(matrix.cells, *[list(names) or None for names in facets])


class SelectionError(ConfigError):
    """A selection naming a method, base model, dataset or cell id its matrix lacks, or picking no cell."""


def _listed(names: Sequence[str], matrix: str) -> str:
    shown = ", ".join(names[:SHOWN_NAMES])
    more = len(names) - SHOWN_NAMES
    return shown + (f", ... and {more} more: corewarding matrix list --matrix {matrix}" if more > 0 else "")


def _unknown(label: str, name: str, valid: Sequence[str], matrix: str) -> str:
    """One line: the bad name, the closest valid one if any is close, and the valid ones."""
    shown = name if is_plain_name(name) else repr(name)  # a control character or a newline cannot break the line
    return f"{label} {shown}: not in matrix {matrix}{did_you_mean(name, valid)} (valid: {_listed(valid, matrix)})"


def check_selection(matrix: Matrix, selection: Selection, labels: Mapping[str, str] | None = None) -> list[Cell]:
    """The cells the selection picks; a name the matrix lacks is a SelectionError naming it (as ``labels`` calls its
    facet, e.g. ``{"methods": "--method"}``), the closest valid name and the valid ones, and so is a selection whose
    names are each valid but together pick no cell. Pure: it reads no file, so it runs before anything starts."""
    names = {**{facet: label for facet, _, label in FACETS}, **(labels or {})}
    for facet, attribute, _ in FACETS:
        valid = sorted({str(getattr(cell, attribute)) for cell in matrix.cells})
        for name in getattr(selection, facet):
            if name not in valid:
                raise SelectionError(_unknown(names[facet], name, valid, matrix.name))
    cells = selected_cells(matrix, selection)
    if not cells:
        chosen = ", ".join(
            f"{names[f]} {','.join(getattr(selection, f))}" for f, _, _ in FACETS if getattr(selection, f)
        )
        raise SelectionError(f"{chosen or 'the selection'}: no cell of matrix {matrix.name} matches all of these "
                             f"(corewarding matrix list --matrix {matrix.name})")  # fmt: skip
    return cells


def plan_cells(
    selection: Selection,
    overrides: Sequence[str] = (),
    eval_overrides: Sequence[str] = (),
    labels: Mapping[str, str] | None = None,
    workers: int | None = 1,
) -> list[CellPlan]:
    """The selected cells, each with its config composed (a bad override fails here, before any work); ``labels``
    name the selection's facets in its errors (``check_selection``). ``workers`` > 1 composes in that many forked
    processes, None in as many as the cells and cores make worth it (``compose_pool``; the dry run's choice: a
    flow's process runs threads, and composes here)."""
    matrix = load_matrix(selection.matrix)
    cells = check_selection(matrix, selection, labels)  # an unknown name: an error naming the matrix and the valid ones
    plans = [CellPlan(matrix, cell, tuple(overrides), tuple(eval_overrides)) for cell in cells]
    configs = compose_all(
        [plan.train_overrides() for plan in plans], workers_for(len(plans)) if workers is None else workers
    )
    return [replace(plan, cfg=cfg) for plan, cfg in zip(plans, configs, strict=True)]


def paired_stages(dataset: DatasetConfig) -> list[str]:
    """The stages that make a set's rephrased pairs: ``dvc_paired_stages`` (a list, or one list per
    ``rephrased_source``: ``release`` imports the paper's rephrasings, ``generate`` runs the rephraser)."""
    stages = dataset.dvc_paired_stages
    if isinstance(stages, dict):
        source = dataset.rephrased_source
        if source not in stages:
            known = ", ".join(str(k) for k in stages)
            raise ConfigError(f"dataset.rephrased_source={source!r}: must be one of {known}")
        stages = stages[source]
    return list(stages)


def data_stages(plan: CellPlan) -> list[str]:
    """The DVC stages a cell's training data comes from (``dataset.dvc_stages``, plus the paired ones if needed)."""
    dataset = section_of(plan.cfg, DatasetConfig)
    stages = list(dataset.dvc_stages)
    if needs_rephrased_view(plan.cfg):
        stages += paired_stages(dataset)
    return stages


def all_data_stages(plans: Sequence[CellPlan]) -> list[str]:
    """The union of the cells' data stages, in first-seen order."""
    return list(dict.fromkeys(stage for plan in plans for stage in data_stages(plan)))


def data_files(plan: CellPlan) -> dict[str, str]:
    """The files the cell trains and validates on (what its ``train@`` stage depends on)."""
    dataset = section_of(plan.cfg, DatasetConfig)
    paired = needs_rephrased_view(plan.cfg)
    train = dataset.original_files if paired else dataset.train_files
    return {"data": train, "paired_data": dataset.rephrased_files if paired else train, "val_data": dataset.val_files}


def method_parent(method: str) -> str:
    """The method file an ablation extends (its Hydra defaults), or the method itself: both are DVC params."""
    defaults = load_group_option("method", method).get("defaults") or []  # raw read: Hydra's list, not a section
    parents = [d for d in defaults if isinstance(d, str) and d != "_self_"]
    return parents[0] if parents else method


def dvc_entry(plan: CellPlan) -> dict[str, str]:
    """The cell's entry in ``params.yaml: cells`` (the foreach of the ``train@``/``evaluate@`` stages).

    The stage commands get this run's overrides, so ``dvc repro`` retrains and re-evaluates the cell as it ran.
    """
    args = {"train_args": plan.overrides, "eval_args": plan.run_evaluation_overrides()}
    for key, values in args.items():
        spaced = [v for v in values if any(c.isspace() for c in v)]
        if spaced:
            raise ConfigError(f"{key}: an override with white space cannot go into a DVC stage command: {spaced}")
    return {
        "matrix": plan.matrix.name,
        "method": plan.cell.method,
        "method_parent": method_parent(plan.cell.method),
        "base_model": plan.cell.base_model,
        "dataset": plan.cell.dataset,
        "run_dir": str(plan.run_dir),
        **data_files(plan),
        "train_args": " ".join(args["train_args"]),
        "eval_args": " ".join(args["eval_args"]),
    }


def data_groups(plans: Sequence[CellPlan]) -> dict[tuple[str, ...], list[str]]:
    """Cells grouped by the data stages they need, so one failing group does not hold back the others."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for plan in plans:
        groups.setdefault(tuple(data_stages(plan)), []).append(plan.cell_id)
    return groups


def plan_cell(matrix: str, cell_id: str, overrides: Sequence[str] = (), eval_overrides: Sequence[str] = ()) -> CellPlan:
    """One cell's plan from plain values (what a Prefect task receives)."""
    return plan_cells(Selection(matrix=matrix, cells=(cell_id,)), overrides, eval_overrides)[0]
