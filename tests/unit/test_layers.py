"""The floors contract (pyproject.toml, run by `make lint`): kept by the checkout, broken by an upward import."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from corewarding.cli.main import GROUPS

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")

pytestmark = pytest.mark.skipif(not LINT_IMPORTS.is_file(), reason="import-linter is not installed (the dev extra)")


def _copy_checkout(tmp_path: Path) -> Path:
    """The packages and the contract, copied: the test edits the copy, never the checkout."""
    copy = tmp_path / "checkout"
    shutil.copytree(ROOT / "src" / "corewarding", copy / "src" / "corewarding", ignore=shutil.ignore_patterns("*.pyc"))
    for package in ("flows", "dashboard"):
        shutil.copytree(ROOT / package, copy / package, ignore=shutil.ignore_patterns("*.pyc"))
    shutil.copy(ROOT / "pyproject.toml", copy / "pyproject.toml")
    return copy


def _lint_imports(checkout: Path) -> subprocess.CompletedProcess[str]:
    """lint-imports on ``checkout``: its packages first on the path, so the copy is what is analysed."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(checkout / "src"), str(checkout)])}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"], cwd=checkout, env=env, capture_output=True, text=True, timeout=120
    )


def test_the_checkout_keeps_the_floors(tmp_path: Path) -> None:
    result = _lint_imports(_copy_checkout(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 kept, 0 broken" in result.stdout


def test_an_upward_import_inside_a_function_breaks_the_contract(tmp_path: Path) -> None:
    checkout = _copy_checkout(tmp_path)
    files = checkout / "src" / "corewarding" / "files.py"
    files.write_text(files.read_text() + "\n\ndef _upward() -> None:\n    from corewarding.training import backend\n")
    result = _lint_imports(checkout)
    assert result.returncode == 1
    assert "corewarding.files -> corewarding.training.backend" in result.stdout


def _contract_units() -> list[str]:
    """Every unit the floors contract names (``a | b`` on one floor are two units)."""
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    [floors] = [c["layers"] for c in contracts if c["type"] == "layers"]
    return [unit.strip() for floor in floors for unit in floor.split("|")]


def test_every_module_of_the_package_takes_a_floor() -> None:
    """The floor list is closed: a new module or package of corewarding must be given a floor in the contract."""
    package = ROOT / "src" / "corewarding"
    modules = {f"corewarding.{p.stem}" for p in package.glob("*.py") if not p.name.startswith("__")}
    packages = {f"corewarding.{p.name}" for p in package.iterdir() if (p / "__init__.py").is_file()}
    units = set(_contract_units())
    without = (modules | packages) - units
    assert not without, f"modules without a floor in pyproject.toml: {sorted(without)}"
    assert not units - (modules | packages | {"flows", "dashboard"}), "the contract names a unit that does not exist"


def test_the_architecture_page_names_every_unit_of_the_contract() -> None:
    page = (ROOT / "docs" / "architecture.md").read_text()
    table = page.split("## The floors, top to bottom", 1)[1].split("```", 2)[1]  # the floor table's code block
    named = set(re.findall(r"[a-z_]+", table))
    missing = [unit for unit in _contract_units() if unit.rsplit(".", 1)[-1] not in named]
    assert not missing, f"docs/architecture.md's floor table does not name: {missing}"


def test_the_architecture_page_lists_every_command_group_in_order() -> None:
    """Floor 11's text names the CLI's group modules as cli/main.py's GROUPS holds them (a new group is listed)."""
    page = (ROOT / "docs" / "architecture.md").read_text()
    table = " ".join(page.split("## The floors, top to bottom", 1)[1].split("```", 2)[1].split())
    listed = table.split("imported only when its command runs: ", 1)[1].split(";", 1)[0]
    assert listed.split(", ") == [module for module, _ in GROUPS]
