"""``tools/config_reads.py``: what it counts as a raw read of the composed config, and the budget ``make lint``
holds the package to."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("config_reads", ROOT / "tools" / "config_reads.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["config_reads"] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


SOURCE = """
from omegaconf import DictConfig, OmegaConf

def shape(cfg: DictConfig, rows: dict) -> int:
    method = cfg.method
    n = cfg.grpo.n
    name = method.get("name")
    seed = cfg["seed"]
    teacher = OmegaConf.select(cfg, "method.teacher")  # raw read: optional section, null when absent
    fine = rows.get("reward") + rows["seed"]            # a plain dict: not a config
    return n + seed

def elsewhere(config) -> int:
    return config.get("k")                              # not annotated DictConfig, not composed here: not seen

class Holder:
    def __init__(self, cfg: DictConfig) -> None:
        self._cfg = cfg

    def size(self) -> int:
        return self._cfg["grpo"]["n"]
"""


def test_it_counts_string_reads_of_config_objects_only(tmp_path: Path) -> None:
    tool = _tool()
    module = tmp_path / "module.py"
    module.write_text(textwrap.dedent(SOURCE))
    reads = tool.reads_in(module)
    strings = sorted((r.line, r.text) for r in reads if r.kind == "string")
    lines = module.read_text().splitlines()
    assert [text for _, text in strings] == [
        "method.get('name')",
        "cfg['seed']",
        "OmegaConf.select(cfg, 'method.teacher')",
        "self._cfg['grpo']['n']",
    ]
    assert all("rows" not in lines[line - 1] for line, _ in strings)
    [selected] = [r for r in reads if "select" in r.text]
    assert selected.reason == "optional section, null when absent"
    attributes = sorted(r.text for r in reads if r.kind == "attribute")
    assert attributes == ["cfg.grpo", "cfg.method"]


def test_a_read_without_its_reason_or_over_the_budget_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tool = _tool()
    module = tmp_path / "module.py"
    module.write_text(textwrap.dedent(SOURCE))
    assert tool.main([str(tmp_path), "--budget", "10"]) == 1  # three of the four reads have no reason
    assert "module.py:8: a raw read without" in capsys.readouterr().err
    explained = "\n".join(
        line + ("  # raw read: test" if "cfg[" in line or (".get(" in line and "rows" not in line) else "")
        for line in textwrap.dedent(SOURCE).splitlines()
    )
    module.write_text(explained)
    assert tool.main([str(tmp_path), "--budget", "4"]) == 0
    assert tool.main([str(tmp_path), "--budget", "3"]) == 1
    assert "over the budget of 3" in capsys.readouterr().err


def test_only_modules_in_a_schemas_package_folder_are_exempt(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The typed sections (src/corewarding/schemas/) read the config by key; a folder above the root never counts."""
    tool = _tool()
    root = tmp_path / "schemas" / "checkout"
    read = (
        'from omegaconf import DictConfig\n\n\ndef f(cfg: DictConfig) -> int:\n    return cfg["seed"]  # raw read: k\n'
    )
    modules = ["pkg/schemas/reading.py", "pkg/schemas/deep/tables.py", "pkg/training/schemas.py", "pkg/schemas_v2/a.py"]
    for module in [*modules, "top.py"]:
        (root / module).parent.mkdir(parents=True, exist_ok=True)
        (root / module).write_text(read)
    assert tool.main([str(root), "--list"]) == 0
    listed = [line.split(":", 1)[0] for line in capsys.readouterr().out.splitlines() if line.endswith("[k]")]
    relative = [Path(p).relative_to(root).as_posix() for p in listed]
    assert relative == ["pkg/schemas_v2/a.py", "pkg/training/schemas.py", "top.py"]
    assert tool.main([str(root / "pkg" / "schemas" / "reading.py"), str(root / "top.py"), "--list"]) == 0
    assert "raw string reads: 1 in 1 modules" in capsys.readouterr().out
    assert tool.main([str(root / "pkg" / "schemas"), str(root / "pkg" / "training")]) == 0
    assert "raw string reads: 1 in 1 modules" in capsys.readouterr().out


def test_the_package_keeps_its_budget() -> None:
    """What ``make lint`` checks: at most 20 raw string reads outside the schemas package, each with its reason."""
    tool = _tool()
    assert tool.main([str(ROOT / "src" / "corewarding"), str(ROOT / "flows"), str(ROOT / "dashboard")]) == 0
