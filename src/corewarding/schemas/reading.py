"""Reading a config section into its schema: ConfigError, ``setting`` (a field's doc and Rule), the common rules,
``typed`` (one line naming the bad key) and ``describe`` (a schema as a table)."""

from __future__ import annotations

import math
import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, fields, is_dataclass
from functools import cache
from typing import Any, TypeVar

from omegaconf import Container, DictConfig, OmegaConf

from corewarding.errors import ExpectedError

T = TypeVar("T")


class ConfigError(ExpectedError, ValueError):
    """A config value that cannot work; the message names the key."""


_KEY = re.compile(r"[A-Za-z0-9_.@/\[\]-]{1,200}")


def without_values(message: str) -> str:
    """A ConfigError's message with only its key and its rule (``optimizer.lr: must be finite and > 0``): what a
    work pool's job run may say, since a value may have been read from the machine's environment."""
    found = _KEY.match(message)
    key = found.group(0) if found else "a config key"
    rule = message.rsplit(": must be ", 1)[1].split(", got ", 1)[0] if ": must be " in message else None
    return f"{key}: must be {rule}" if rule else f"{key}: not valid (the value is not shown for a job run)"


@dataclass(frozen=True)
class Rule:
    """What a value must be: a predicate and the words for it (``finite and > 0``)."""

    ok: Callable[[Any], bool]
    requirement: str


def setting(doc: str, rule: Rule | None = None, *, default: Any = MISSING) -> Any:
    """A schema field: its one-line doc and its range (the type comes from the annotation); with ``default`` the key
    may be left out of the YAML (a schema with such fields is ``kw_only``)."""
    metadata = {"doc": doc, "rule": rule}
    if isinstance(default, dict | list):
        return field(default_factory=lambda: type(default)(default), metadata=metadata)
    return field(default=default, metadata=metadata)


AT_LEAST_1 = Rule(lambda v: v >= 1, "a whole number >= 1")
POSITIVE = Rule(lambda v: v > 0, "finite and > 0")
NON_NEGATIVE = Rule(lambda v: v >= 0, "finite and >= 0")
AT_LEAST_1_OR_NULL = Rule(lambda v: v >= 1, "a whole number >= 1, or null")
GIGABYTES_OR_NULL = Rule(lambda v: v > 0, "a number > 0 or null (this machine's)")
UNIT_INTERVAL = Rule(lambda v: 0 <= v <= 1, "in [0, 1]")
BETAS = Rule(lambda v: len(v) == 2 and all(0 <= b < 1 for b in v), "two numbers, each in [0, 1)")


WHOLE_OR_NULL = Rule(lambda v: v >= 1, "a whole number >= 1, or null")
SEED = Rule(lambda v: v >= 0, "a whole number >= 0")
DTYPES = ("float32", "bfloat16", "float16")


def one_of(*choices: str, why: str = "") -> Rule:
    return Rule(lambda v: v in choices, why or f"one of {', '.join(choices)}")


@cache
def _hints(schema: type) -> dict[str, Any]:
    return typing.get_type_hints(schema)


_MODULE = re.compile(r"\b(?:[a-z_]+\.)+(?=[A-Za-z_]+\b)")  # typing., corewarding.schemas.training.


def _name(hint: Any) -> str:
    """``int``, ``list[str]``, ``float | None``, ``TeacherConfig | None``: a type as the docs write it, each class
    by its bare name."""
    if isinstance(hint, type):
        return hint.__name__
    return _MODULE.sub("", str(hint))


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _of_type(value: Any, hint: Any) -> bool:
    """Whether ``value`` is of the annotated type (an int counts as a float; a bool never as a number)."""
    if isinstance(hint, types.UnionType):
        return any(_of_type(value, arm) for arm in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if hint is Any:
        return True
    origin = typing.get_origin(hint)
    if origin in (list, tuple):
        items = typing.get_args(hint)
        return isinstance(value, list | tuple) and all(_of_type(v, items[0]) for v in value)
    if origin is dict:
        key, item = typing.get_args(hint)
        return isinstance(value, dict) and all(_of_type(k, key) and _of_type(v, item) for k, v in value.items())
    if hint is float:
        return _number(value)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint)


def field_problem(schema: type, name: str, value: Any) -> str | None:
    """What ``value`` of ``schema``'s field ``name`` must be, or None when it is fine."""
    [spec] = [f for f in fields(schema) if f.name == name]
    rule: Rule | None = spec.metadata["rule"]
    hint = _hints(schema)[name]
    optional = isinstance(hint, types.UnionType) and type(None) in typing.get_args(hint)
    requirement = rule.requirement if rule else f"of type {_name(hint)}"  # an optional field's rule says "or null"
    if optional and value is None:
        return None
    if not _of_type(value, hint):
        return requirement
    try:
        good = rule is None or bool(rule.ok(value))
    except TypeError:
        good = False
    return None if good else requirement


def _fits(hint: Any, value: Any) -> bool:
    """Whether ``value`` has the container shape of ``hint`` (a mapping for a schema or a dict, a list for a tuple)."""
    origin = typing.get_origin(hint) or hint
    if is_dataclass(hint) or origin is dict:
        return isinstance(value, Mapping)
    return origin is tuple and isinstance(value, list | tuple)


def _built(hint: Any, value: Any, key: str) -> Any:
    """``value`` as the annotated type: a nested schema's mapping read by ``typed``, a list as a tuple (inside a
    dict too); anything else as it is, for ``field_problem`` to judge."""
    if isinstance(hint, types.UnionType):
        arms = [arm for arm in typing.get_args(hint) if _fits(arm, value)]
        return _built(arms[0], value, key) if arms else value
    if is_dataclass(hint) and isinstance(value, Mapping):
        return typed(typing.cast(type, hint), value, key)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is tuple and isinstance(value, list | tuple):
        return tuple(_built(args[0], v, f"{key}[{i}]") for i, v in enumerate(value))
    if origin is dict and isinstance(value, Mapping):
        return {k: _built(args[1], v, f"{key}.{k}") for k, v in value.items()}
    return value


def _has_default(spec: Any) -> bool:
    return spec.default is not MISSING or spec.default_factory is not MISSING


def typed(schema: type[T], section: Mapping[str, Any] | DictConfig | None, prefix: str) -> T:
    """The section as a ``schema`` object; ConfigError naming the first key that is missing, unknown, of the wrong
    type or out of range. A field with a default may be left out; a nested schema is read the same way."""
    raw = OmegaConf.to_container(section, resolve=True) if isinstance(section, DictConfig) else dict(section or {})
    if not isinstance(raw, dict):
        raise ConfigError(f"{prefix}: must be a mapping of its keys, got {raw!r}")
    values: dict[str, Any] = {
        str(k): OmegaConf.to_container(v) if isinstance(v, Container) else v for k, v in raw.items()
    }
    specs = fields(schema)  # type: ignore[arg-type]  # every schema is a dataclass; T is not bound to one
    known = [f.name for f in specs]
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise ConfigError(f"{prefix}.{unknown[0]}: unknown key; {prefix} has {', '.join(known)}")
    hints = _hints(schema)  # type: ignore[arg-type]  # as above: a dataclass type
    for spec in specs:
        name = spec.name
        if name not in values:
            if _has_default(spec):
                continue
            raise ConfigError(f"{prefix}.{name}: missing")
        given = values[name]
        values[name] = _built(hints[name], given, f"{prefix}.{name}")
        problem = field_problem(schema, name, values[name])
        if problem is not None:
            raise ConfigError(f"{prefix}.{name}={given!r}: must be {problem}")
    return schema(**values)


def describe(schema: type) -> list[tuple[str, str, str, str]]:
    """(field, type, range, doc) of each field: the schema as a table for the docs and ``config show``."""
    hints = _hints(schema)
    rows = []
    for spec in fields(schema):
        rule = spec.metadata["rule"]
        hint = hints[spec.name]
        rows.append((spec.name, _name(hint), rule.requirement if rule else "", spec.metadata["doc"]))
    return rows
