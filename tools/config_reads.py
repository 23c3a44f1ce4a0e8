"""Count the raw reads of the composed Hydra config outside the ``schemas`` package: what ``make lint`` budgets.

A raw read takes a value by a string key from a config object instead of from a typed section
(``corewarding.schemas``): ``cfg.get("k")``, ``cfg["k"]`` or ``OmegaConf.select(cfg, "k")``. A config object is a
parameter annotated ``DictConfig``, a name assigned from ``compose_config``, ``load_group_option``,
``OmegaConf.load``/``create``/``select``, or any attribute, item or ``.get`` of one (``method = cfg.method``).
Attribute reads of a config object (``cfg.grpo.n``) are counted too, and listed with ``--attributes``; they have no
budget yet.

Every raw string read that stays carries its reason on its line: ``# raw read: <why>``. The command fails (exit 1)
when a raw string read lacks one, or when there are more than ``--budget`` of them::

    python tools/config_reads.py src/corewarding flows dashboard            # the summary and the check
    python tools/config_reads.py --list src/corewarding                     # every raw string read, with its line
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

CONFIG_SOURCES = {"compose_config", "load_group_option", "compose_eval_config", "compose_data_config"}
OMEGACONF_SOURCES = {"load", "create", "select", "merge"}
REASON = "# raw read:"
EXEMPT = {"schemas"}  # package folders whose modules are not counted: the typed sections read the config by key


@dataclass(frozen=True)
class Read:
    path: str
    line: int
    kind: str  # "string" or "attribute"
    text: str
    reason: str | None


def _is_dictconfig(annotation: ast.expr | None) -> bool:
    return annotation is not None and "DictConfig" in ast.unparse(annotation)


def _root(node: ast.expr) -> ast.expr:
    """The name (or self.attr) an attribute, item or .get chain starts from."""
    while True:
        on_self = isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"
        if isinstance(node, ast.Subscript) or (isinstance(node, ast.Attribute) and not on_self):
            node = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            node = node.func.value
        else:
            return node


def _key(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return f"self.{node.attr}"
    return None


class _Scope(ast.NodeVisitor):
    """Walks one module, tracking which names hold config objects, function by function."""

    def __init__(self, path: str, lines: list[str], self_configs: set[str]) -> None:
        self.path, self.lines = path, lines
        self.configs: set[str] = set(self_configs)
        self.reads: list[Read] = []
        self.inner: set[int] = set()  # the inner links of a chain already counted (cfg["a"]["b"] is one read)

    def is_config(self, node: ast.expr) -> bool:
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in CONFIG_SOURCES:
                return True
            if isinstance(func, ast.Attribute):
                if isinstance(func.value, ast.Name) and func.value.id == "OmegaConf":
                    return func.attr in OMEGACONF_SOURCES
                if func.attr in CONFIG_SOURCES:
                    return True
        key = _key(_root(node))
        return key is not None and key in self.configs

    def _record(self, node: ast.AST, kind: str) -> None:
        if id(node) in self.inner:
            return
        link: ast.AST | None = node
        while link is not None:
            link = link.value if isinstance(link, ast.Attribute | ast.Subscript) else getattr(link, "func", None)
            if isinstance(link, ast.Subscript | ast.Call):
                self.inner.add(id(link))
        line = self.lines[node.lineno - 1]  # type: ignore[attr-defined]  # every expression node has a line
        reason = line.split(REASON, 1)[1].strip() if REASON in line else None
        self.reads.append(Read(self.path, node.lineno, kind, ast.unparse(node)[:100], reason))  # type: ignore[attr-defined]  # as above

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        saved = set(self.configs)
        args = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
        self.configs |= {a.arg for a in args if _is_dictconfig(a.annotation)}
        self.generic_visit(node)
        self.configs = saved

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Assign(self, node: ast.Assign) -> None:
        self.generic_visit(node)
        if self.is_config(node.value):
            for target in node.targets:
                for name in ast.walk(target):
                    key = _key(name) if isinstance(name, ast.Name | ast.Attribute) else None
                    if key:
                        self.configs.add(key)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self.generic_visit(node)
        key = _key(node.target)
        if key and (_is_dictconfig(node.annotation) or (node.value is not None and self.is_config(node.value))):
            self.configs.add(key)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute):
            string_arg = bool(node.args) and isinstance(node.args[0], ast.Constant)
            select = func.attr == "select" and isinstance(func.value, ast.Name) and func.value.id == "OmegaConf"
            if select or (func.attr == "get" and string_arg and self.is_config(func.value)):
                self._record(node, "string")
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if (
            isinstance(node.ctx, ast.Load)
            and isinstance(node.slice, ast.Constant)
            and isinstance(node.slice.value, str)
            and self.is_config(node.value)
        ):
            self._record(node, "string")
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        inner = node.value
        if isinstance(node.ctx, ast.Load) and _key(inner) in self.configs and node.attr not in ("get", "items"):
            self._record(node, "attribute")
        self.generic_visit(node)


def _self_configs(tree: ast.Module) -> set[str]:
    """``self.x`` names a class sets from a DictConfig parameter (``self._cfg = cfg``)."""
    found: set[str] = set()
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef):
            params = {a.arg for a in fn.args.args if _is_dictconfig(a.annotation)}
            for node in ast.walk(fn):
                if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) and node.value.id in params:
                    found |= {k for t in node.targets if (k := _key(t)) and k.startswith("self.")}
    return found


def reads_in(path: Path) -> list[Read]:
    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text, filename=str(path))
    scope = _Scope(str(path), text.splitlines(), _self_configs(tree))
    scope.visit(tree)
    return scope.reads


def exempt(path: Path, root: Path) -> bool:
    """Whether ``path`` lies in an EXEMPT folder: ``root`` itself or one below it (a root named as a file: its own)."""
    folders = (root.name, *path.relative_to(root).parts[:-1]) if root.is_dir() else (path.parent.name,)
    return not EXEMPT.isdisjoint(folders)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("roots", nargs="+", type=Path)
    parser.add_argument("--budget", type=int, default=20, help="raw string reads allowed (default 20)")
    parser.add_argument("--list", action="store_true", help="print every raw string read")
    parser.add_argument("--attributes", action="store_true", help="print every attribute read too")
    args = parser.parse_args(argv)
    found = [(p, root) for root in args.roots for p in ([root] if root.is_file() else root.rglob("*.py"))]
    files = sorted(p for p, root in found if not exempt(p, root))
    reads = [r for p in files for r in reads_in(p)]
    strings = [r for r in reads if r.kind == "string"]
    attributes = [r for r in reads if r.kind == "attribute"]
    for r in strings if args.list or args.attributes else []:
        print(f"{r.path}:{r.line}: {r.text}" + (f"   [{r.reason}]" if r.reason else ""))
    for r in attributes if args.attributes else []:
        print(f"{r.path}:{r.line}: attribute {r.text}")
    modules = Counter(r.path for r in strings)
    print(f"raw string reads: {len(strings)} in {len(modules)} modules (budget {args.budget}); "
          f"attribute reads of a config: {len(attributes)} in {len({r.path for r in attributes})} modules")  # fmt: skip
    unexplained = [r for r in strings if not r.reason]
    for r in unexplained:
        print(f"{r.path}:{r.line}: a raw read without '{REASON} <why>': {r.text}", file=sys.stderr)
    over = len(strings) > args.budget
    if over:
        print(f"{len(strings)} raw string reads, over the budget of {args.budget}", file=sys.stderr)
    return 1 if unexplained or over else 0


if __name__ == "__main__":
    sys.exit(main())
