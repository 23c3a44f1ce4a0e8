"""Remove the top-level ``tests`` package that verl's wheel installs into site-packages.

verl 0.9.1's wheel ships its own test suite as a regular package named ``tests`` (its RECORD lists
``tests/__init__.py`` and ~150 more files). This repository's ``tests`` has no ``__init__.py``: it is a namespace
package, and Python prefers a regular package found anywhere on ``sys.path`` to a namespace portion. So, outside
pytest, ``import tests.support.verl_e2e`` found verl's package and failed with "No module named 'tests.support'".

Only the files verl's RECORD names are removed (and the ``__pycache__`` folders and folders left empty), so a
``tests`` of another distribution would stay. Nothing in verl imports its tests. Run with the venv's python:
``.venv-verl/bin/python tools/drop_verl_tests.py``; it prints what it did and is a no-op the second time.
"""

from __future__ import annotations

import importlib.metadata
import shutil
import sys
from pathlib import Path


def drop(distribution: str = "verl", package: str = "tests") -> int:
    """Delete ``package``'s files that ``distribution`` installed; return how many files were removed."""
    try:
        dist = importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        return 0
    files = [f for f in dist.files or [] if f.parts and f.parts[0] == package]
    if not any(f.parts == (package, "__init__.py") for f in files):
        return 0  # this build does not ship the package
    removed = 0
    for f in files:
        path = Path(str(dist.locate_file(f)))
        if path.is_file():
            path.unlink()
            removed += 1
    root = Path(str(dist.locate_file(package)))
    if root.is_dir():
        for cache in sorted(root.rglob("__pycache__"), reverse=True):
            shutil.rmtree(cache, ignore_errors=True)
        for folder in sorted((p for p in root.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
            if not any(folder.iterdir()):
                folder.rmdir()
        if not any(root.iterdir()):
            root.rmdir()
    return removed


if __name__ == "__main__":
    count = drop()
    print(f"drop_verl_tests: removed {count} file(s) of verl's top-level 'tests' package from {sys.prefix}")
