"""The ``>>>`` examples in the library's docstrings (hand-computed rewards, votes, names) run as tests: pytest's
``--doctest-modules`` covers ``tests/`` only, so each library module's examples are run here."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import corewarding

SKIPPED = ("corewarding.cli.__main__",)  # runs the command line on import


def _modules() -> list[str]:
    names = [m.name for m in pkgutil.walk_packages(corewarding.__path__, "corewarding.")]
    names += ["dashboard.curves_chart", "dashboard.config_diff", "dashboard.common"]
    return sorted(n for n in names if not n.startswith(SKIPPED))


@pytest.mark.parametrize("name", _modules())
def test_docstring_examples(name: str) -> None:
    if name.startswith("corewarding.training.verl"):
        importlib.import_module("verl")  # verl first: its entry point imports our plug-ins, which import verl's parts
    module = importlib.import_module(name)
    tests = [t for t in doctest.DocTestFinder().find(module) if t.examples]
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in tests:
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} examples failed (see the output)"
