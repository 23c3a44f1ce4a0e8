"""Every checker records a version that changes with its code, so a change to the strict checker's normalisation
(or to math-verify's wrapper) gives new scores another settings key instead of mixing them with the old ones."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from corewarding.evaluation import provenance
from corewarding.evaluation.provenance import checker_settings, checker_version, code_digest, package_version
from corewarding.settings_diff import settings_key


def _module(path: Path, text: str) -> ModuleType:
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_each_checker_names_its_code(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    strict, math_verify = checker_version("strict"), checker_version("math_verify")
    assert strict.startswith("code-") and len(strict) == len("code-") + 12
    assert math_verify.startswith(f"{package_version('math-verify')}+code-") and math_verify[-12:] != strict[-12:]
    assert checker_version("lm_eval", "0.4.9").startswith("0.4.9+code-")

    before = _module(tmp_path / "normalise_a.py", "def strip(s):\n    return s.strip()\n")
    after = _module(tmp_path / "normalise_b.py", "def strip(s):\n    return s.strip().lower()\n")
    assert code_digest((before,)) != code_digest((after,))
    settings = {"temperature": 0.0, "n": 1}
    monkeypatch.setitem(provenance.CHECKER_CODE, "strict", (before,))
    old = checker_settings(settings, "strict")
    monkeypatch.setitem(provenance.CHECKER_CODE, "strict", (after,))
    new = checker_settings(settings, "strict")
    assert old["checker_version"] != new["checker_version"]
    assert settings_key(old) != settings_key(new)  # a verdict never compares scores graded by different code
