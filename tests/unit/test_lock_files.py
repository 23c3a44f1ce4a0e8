"""The lock files (`make lock`) still hold what pyproject.toml asks for: a dependency added or re-pinned there without
`make lock` fails here, before an install from the stale lock would. Every locked file carries its SHA-256."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
LOCKS = {  # each lock file and the extras its venv installs (the Makefile's `lock` target)
    "requirements.lock": ("rl", "dev", "dashboard", "eval"),
    "requirements-verl-e2e.lock": ("rl", "dev", "cpu-rollout"),
}
PIN = re.compile(r"^([A-Za-z0-9._-]+)==(\S+)((?:\s*\\\s*--hash=sha256:[0-9a-f]{64})*)\s*$")


def _locked(name: str) -> dict[str, tuple[str, list[str]]]:
    """The lock's packages: canonical name -> (version, SHA-256s); a line that is not a pin with hashes fails."""
    text = "\n".join(line for line in (ROOT / name).read_text().splitlines() if not line.startswith("#"))
    found = {}
    for entry in re.split(r"\n(?=\S)", text.strip()):  # a pin and its indented --hash lines
        match = PIN.match(entry.replace("\n", " "))
        assert match, f"{name}: not a pinned requirement with hashes: {entry!r}"
        found[canonicalize_name(match[1])] = (match[2], re.findall(r"sha256:([0-9a-f]{64})", match[3]))
    return found


def _wanted(extras: tuple[str, ...]) -> list[tuple[Requirement, str]]:
    """pyproject.toml's requirements for ``extras`` that apply on this interpreter, with the extra that asks."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    found = [(Requirement(r), "") for r in project["dependencies"]]
    found += [(Requirement(r), extra) for extra in extras for r in project["optional-dependencies"][extra]]
    return [(r, extra) for r, extra in found if r.marker is None or r.marker.evaluate({"extra": extra})]


@pytest.mark.parametrize("name", sorted(LOCKS))
def test_every_requirement_of_pyproject_is_locked_at_a_version_it_allows(name: str) -> None:
    locked = _locked(name)
    wrong = []
    for requirement, extra in _wanted(LOCKS[name]):
        package = locked.get(canonicalize_name(requirement.name))
        version = None if package is None else package[0]
        if version is None or not requirement.specifier.contains(version, prereleases=True):
            wrong.append(f"{requirement} ({extra or 'dependencies'}): locked {version}")
    assert not wrong, f"{name} is stale; run `make lock`: {wrong}"


@pytest.mark.parametrize("name", sorted(LOCKS))
def test_every_locked_file_has_a_sha256_and_the_project_is_not_locked(name: str) -> None:
    locked = _locked(name)
    assert "corewarding" not in locked  # installed editable after the lock (pip refuses an editable with hashes)
    assert len(locked) > 200 and all(hashes for _, hashes in locked.values())
    assert locked["torch"][0].endswith("+cpu")  # the CPU wheel, not the CUDA build PyPI serves
    assert "file://" not in (ROOT / name).read_text()  # no machine's own paths: any index serving the files will do
