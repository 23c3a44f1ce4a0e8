"""The options of a pipeline run, written once: each field of ``RunOptions`` is a parameter of the
``corewarding-pipeline`` flow, an option of ``corewarding pipeline run`` (cli/pipeline.py builds them from the fields)
and a keyword of ``load_settings``, whose default is the field's key in ``configs/pipeline.yaml``.

A new option is one field here (its type, its help line, its key in ``configs/pipeline.yaml``, its flag), its line in
``configs/pipeline.yaml`` and its doc (docs/orchestration.md); code reads it, with the configured value filled in, as
``settings.options.<name>``. This module imports nothing heavy: ``pipeline run --help`` builds its options from it.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields
from typing import Annotated, Any, Literal, TypeVar, Union, get_args, get_origin, get_type_hints

Form = Literal["value", "list", "repeat", "positional", "switch"]
F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Option:
    """A run option's help line, where ``configs/pipeline.yaml`` keeps its value (taken when the option is not
    given; None: not there, empty) and how the command line gives it: ``flag`` (None: ``--<name-with-dashes>``) and
    ``form``: ``value`` (``--flag VALUE``), ``list`` (``--flag a,b``), ``repeat`` (``--flag a --flag b``),
    ``positional`` (the trailing arguments) or ``switch`` (``--flag`` sets true)."""

    help: str
    config: str | None
    flag: str | None = None
    form: Form = "value"


@dataclass(frozen=True)
class RunOptions:
    """What one pipeline run may set: each field's type and its ``Option``; None means the configured value."""

    matrix: Annotated[str | None, Option("configs/matrix/NAME.yaml (default: pipeline.yaml's, demo)", "matrix")] = None
    methods: Annotated[
        list[str] | None,
        Option("methods, e.g. co_rewarding_1,co_rewarding_2", "select.methods", flag="--method", form="list"),
    ] = None
    base_models: Annotated[
        list[str] | None, Option("base models", "select.base_models", flag="--base-model", form="list")
    ] = None
    datasets: Annotated[list[str] | None, Option("datasets", "select.datasets", flag="--dataset", form="list")] = None
    cells: Annotated[list[str] | None, Option("cell ids", "select.cells", flag="--cell", form="list")] = None
    steps: Annotated[
        list[str] | None, Option("steps to run (a subset of data,train,evaluate,ingest,publish)", "steps", form="list")
    ] = None
    overrides: Annotated[
        list[str] | None,
        Option("training overrides of every cell (paths.* apply to all steps)", None, form="positional"),
    ] = None
    eval_overrides: Annotated[
        list[str] | None, Option("an evaluation override of every cell", None, flag="--eval-override", form="repeat")
    ] = None
    push: Annotated[
        bool | None, Option("upload to the Hub (token: HF_TOKEN or the HF cache)", "publish.push", form="switch")
    ] = None
    force_evaluate: Annotated[
        bool | None, Option("call the evaluation even for evaluated steps", "force_evaluate", form="switch")
    ] = None
    work_pool: Annotated[
        str | None,
        Option(
            "run each cell as a flow run on this Prefect work pool (corewarding deploy --work-pool registers it; "
            "needs PREFECT_API_URL and a shared store: store.url or store.dvc_remote)",
            "work_pool",
        ),
    ] = None


# The options that select cells (``pipeline cells`` and ``audit`` take these).
SELECTION = ("matrix", "methods", "base_models", "datasets", "cells")


@dataclass(frozen=True)
class Spec:
    """One field of ``RunOptions``: its name, its type (``str | None``...) and how it is given."""

    name: str
    hint: Any
    option: Option

    @property
    def flag(self) -> str | None:
        """The command line's ``--flag``; None for the trailing arguments."""
        if self.option.form == "positional":
            return None
        return self.option.flag or "--" + self.name.replace("_", "-")

    @property
    def dest(self) -> str:
        """The attribute the command line's value lands in."""
        return (self.flag or self.name).lstrip("-").replace("-", "_")

    @property
    def item(self) -> type:
        """The type of one value: ``str`` for ``list[str] | None``, ``int`` for ``int | None``."""
        inner = [a for a in get_args(self.hint) if a is not type(None)] if _is_union(self.hint) else [self.hint]
        kind = inner[0] if len(inner) == 1 else str
        if get_origin(kind) is list:
            kind = (get_args(kind) or (str,))[0]
        return kind if isinstance(kind, type) else str


def _is_union(hint: Any) -> bool:
    return get_origin(hint) in (Union, types.UnionType)


def specs(names: Iterable[str] | None = None) -> tuple[Spec, ...]:
    """The fields of ``RunOptions`` in their order (only ``names``, in the fields' order, when given)."""
    hints = get_type_hints(RunOptions, include_extras=True)
    chosen = None if names is None else set(names)
    return tuple(_spec(f.name, hints[f.name]) for f in fields(RunOptions) if chosen is None or f.name in chosen)


def _spec(name: str, hint: Any) -> Spec:
    """A field's ``Annotated[type, Option(...)]`` as its spec; a field without an Option is a TypeError naming it."""
    found = [m for m in getattr(hint, "__metadata__", ()) if isinstance(m, Option)]
    if len(found) != 1:
        raise TypeError(f"RunOptions.{name}: annotate it Annotated[<type> | None, Option(...)]")
    return Spec(name, get_args(hint)[0], found[0])


def names() -> tuple[str, ...]:
    """Every option's name: the flow's parameters (with ``config`` and ``schedule``) and ``load_settings``'s."""
    return tuple(s.name for s in specs())


def make(values: dict[str, Any]) -> RunOptions:
    """``RunOptions`` of these values; an unknown name is a TypeError naming it."""
    unknown = sorted(set(values) - set(names()))
    if unknown:
        raise TypeError(f"unknown pipeline option(s) {', '.join(unknown)} (RunOptions has {', '.join(names())})")
    return RunOptions(**values)


def with_run_options(fn: F) -> F:
    """Give ``fn(*, <its own keyword parameters>, **options)`` the signature a Prefect flow reads: one keyword
    parameter per option (default None: the configured value), then its own; the options' help lines lead its
    docstring's ``Args:`` section (the deployment's parameter descriptions)."""
    own = [p for p in inspect.signature(fn, eval_str=True).parameters.values() if p.kind is not p.VAR_KEYWORD]
    added = [inspect.Parameter(s.name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=s.hint)
             for s in specs()]  # fmt: skip
    returns = inspect.signature(fn, eval_str=True).return_annotation
    fn.__signature__ = inspect.Signature([*added, *own], return_annotation=returns)  # type: ignore[attr-defined]  # inspect reads it
    described = "".join(f"\n    {s.name}: {s.option.help}" for s in specs())
    text, has_args, own_args = inspect.cleandoc(fn.__doc__ or fn.__name__).partition("\nArgs:")  # a summary first
    fn.__doc__ = (
        f"{text.rstrip()}\n\nArgs:{described}{own_args}\n" if has_args else f"{text.rstrip()}\n\nArgs:{described}\n"
    )
    return fn
