"""Bounded YAML reads for files that may come from outside the process (run folders, the store, a user's path).

A YAML alias bomb ("billion laughs": nine levels of nine aliases each) is a few hundred bytes that PyYAML composes
into shared nodes at once, and that OmegaConf then copies out into 9^9 values: the command hangs. ``read_yaml``
refuses a file over ``MAX_BYTES``, a document using more than ``MAX_ALIASES`` aliases, and one that would expand to
more than ``MAX_NODES`` values, each in one line naming the file and the limit, while composing (before anything is
expanded). It parses as ``OmegaConf.load`` does (its loader: ``1e-5`` is a float, duplicate keys are an error).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from omegaconf._utils import get_yaml_loader

MAX_BYTES = 1 << 20  # 1 MiB: a config, matrix or claims file is a few KiB
MAX_ALIASES = 64  # alias uses (*name) in one document; the project's own files use none
MAX_NODES = 1_000_000  # values after expanding aliases: more than a 1 MiB file can spell out without them


class YamlBoundsError(ValueError):
    """A YAML file over one of the limits; the message names the file and the limit."""


class _BoundedLoader(get_yaml_loader()):  # type: ignore[misc]  # a base from a call: OmegaConf's loader (a yaml.SafeLoader)
    """Counts alias uses and each node's expanded size while composing; refuses past the limits."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.aliases = 0
        self.sizes: dict[yaml.Node, int] = {}  # node -> values it expands to (itself and everything under it)

    def compose_node(self, parent: yaml.Node | None, index: object) -> yaml.Node:
        alias = self.check_event(yaml.AliasEvent)
        if alias:
            self.aliases += 1
            if self.aliases > MAX_ALIASES:
                raise YamlBoundsError(f"more than {MAX_ALIASES} aliases (*name) in one document")
        node: yaml.Node = super().compose_node(parent, index)
        if node in self.sizes:
            return node
        if alias:  # the anchor's node is still being composed: the alias is inside it
            raise YamlBoundsError("an alias to a node that contains it (a recursive structure)")
        if isinstance(node, yaml.MappingNode):
            size = 1 + sum(self.sizes[key] + self.sizes[value] for key, value in node.value)
        elif isinstance(node, yaml.SequenceNode):
            size = 1 + sum(self.sizes[item] for item in node.value)
        else:
            size = 1
        if size > MAX_NODES:
            raise YamlBoundsError(f"expands to more than {MAX_NODES:,} values (through aliases)")
        self.sizes[node] = size
        return node


def read_yaml(path: Path, error: type[Exception] = YamlBoundsError) -> Any:
    """The plain data (dicts, lists, scalars; None for an empty file) of the YAML file ``path``.

    Every problem is one line ``<path>: ...`` raised as ``error`` (the caller's own error type): a file over
    ``MAX_BYTES``, over ``MAX_ALIASES`` or ``MAX_NODES``, not UTF-8, unreadable, or not valid YAML. For an OmegaConf
    node, ``OmegaConf.create(read_yaml(path))``.
    """
    try:
        with Path(path).open("rb") as handle:
            data = handle.read(MAX_BYTES + 1)  # never more, whatever the file (a FIFO, a growing file)
    except OSError as exc:
        raise error(f"{path}: cannot read ({exc.strerror or exc})") from None
    if len(data) > MAX_BYTES:
        raise error(f"{path}: larger than {MAX_BYTES // 2**20} MiB, the most a YAML file may hold")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    loader = None
    try:
        loader = _BoundedLoader(text)  # checks the characters at once: a control character is an error here
        return loader.get_single_data()
    except YamlBoundsError as exc:
        raise error(f"{path}: {exc}") from None
    except yaml.YAMLError as exc:
        raise error(f"{path}: not valid YAML ({_problem(exc)})") from None
    except RecursionError:
        raise error(f"{path}: not valid YAML (nested too deeply)") from None
    finally:
        if loader is not None:
            loader.dispose()


def _problem(exc: yaml.YAMLError) -> str:
    """What PyYAML found wrong, and where, in one line."""
    mark = getattr(exc, "problem_mark", None)
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem and mark is not None:
        return f"{exc.problem} at line {mark.line + 1}, column {mark.column + 1}"
    return " ".join(str(exc).split())
