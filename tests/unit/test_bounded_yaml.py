"""YAML from outside the process is read within bounds: an alias bomb or a huge file is one line, not a hang."""

from __future__ import annotations

import shutil
from itertools import pairwise
from pathlib import Path

import pytest

from corewarding import yaml_bounds
from corewarding.cli import main
from corewarding.config import ConfigError, config_dir
from corewarding.evaluation.targets import base_model_target
from corewarding.files import SourceError
from corewarding.matrix import load_matrix
from corewarding.results.claims import ClaimsError, load_claims
from corewarding.results.ingest.ingestion import ingest
from corewarding.results.ingest.run_folders import RunFolderError
from corewarding.yaml_bounds import YamlBoundsError, read_yaml


def billion_laughs(levels: int = 9, width: int = 9) -> str:
    """``a: &a [lol x width]``, then each level a list of ``width`` aliases of the one before: width**levels values."""
    lines = [f"a: &a [{', '.join(['lol'] * width)}]"]
    names = ["a", *(f"n{i}" for i in range(1, levels))]
    for previous, name in pairwise(names):
        lines.append(f"{name}: &{name} [{', '.join([f'*{previous}'] * width)}]")
    return "\n".join(lines) + "\n"


@pytest.fixture
def configs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the project's configs, used by every config read of the test."""
    shutil.copytree(config_dir(), tmp_path / "configs")
    monkeypatch.setenv("COREWARDING_CONFIG_DIR", str(tmp_path / "configs"))
    return tmp_path / "configs"


@pytest.mark.timeout(60)  # without the bounds this hangs (OmegaConf expands 9**9 values); with them it takes ms
def test_a_matrix_alias_bomb_is_refused_in_one_line_and_a_normal_matrix_loads(
    configs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bomb = configs / "matrix" / "bomb.yaml"
    bomb.write_text("name: bomb\ncells: []\n" + billion_laughs())
    with pytest.raises(ConfigError, match=rf"^{bomb}: expands to more than 1,000,000 values"):
        load_matrix("bomb")
    assert main(["matrix", "list", "--matrix", "bomb"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: {bomb}: ") and "1,000,000" in err
    (configs / "matrix" / "small.yaml").write_text("name: small\ncells:\n  - {method: gt_grpo, base_model: tiny, "
                                                   "dataset: tiny, seeds: 2}\n")  # fmt: skip
    small = load_matrix("small")
    assert [c.cell_id for c in small.cells] == ["gt_grpo__tiny__tiny", "gt_grpo__tiny__tiny__seed1"]
    assert len(load_matrix("demo").cells) == 8


def test_alias_uses_are_counted_and_a_doubling_bomb_under_the_count_is_refused_by_its_size(tmp_path: Path) -> None:
    path = tmp_path / "a.yaml"
    uses = yaml_bounds.MAX_ALIASES
    path.write_text("x: &x 1\ny: [" + ", ".join(["*x"] * uses) + "]\n")
    assert read_yaml(path) == {"x": 1, "y": [1] * uses}
    path.write_text("x: &x 1\ny: [" + ", ".join(["*x"] * (uses + 1)) + "]\n")
    with pytest.raises(YamlBoundsError, match=rf"^{path}: more than {uses} aliases"):
        read_yaml(path)
    path.write_text(billion_laughs(levels=uses // 2 + 1, width=2))  # 64 aliases, 2**33 values
    with pytest.raises(YamlBoundsError, match=rf"^{path}: expands to more than 1,000,000 values"):
        read_yaml(path)
    path.write_text("a: &a [1, *a]\n")
    with pytest.raises(YamlBoundsError, match="recursive"):
        read_yaml(path)


def test_a_file_over_the_size_limit_or_not_yaml_is_one_line_of_the_callers_error(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_text("x: " + "y" * yaml_bounds.MAX_BYTES + "\n")
    with pytest.raises(ConfigError, match=rf"^{path}: larger than 1 MiB"):
        read_yaml(path, ConfigError)
    path.write_text("a: 1\na: 2\n")  # parsed as OmegaConf.load does: a duplicate key is an error ...
    with pytest.raises(ConfigError, match=rf"^{path}: not valid YAML \(found duplicate key a at line 2, column 1\)$"):
        read_yaml(path, ConfigError)
    path.write_text("lr: 1e-6\nwhen: 2026-01-01\n")  # ... and 1e-6 is a float, a date stays text
    assert read_yaml(path) == {"lr": 1e-6, "when": "2026-01-01"}


@pytest.mark.timeout(60)
def test_a_run_folder_or_claims_file_holding_a_bomb_is_refused(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "r1"
    run.mkdir(parents=True)
    (run / "config.yaml").write_text("method: {name: gt_grpo}\nbase_model: {name: tiny}\ndataset: {name: tiny}\n"
                                     + billion_laughs())  # fmt: skip
    (run / "metrics.jsonl").write_text('{"step": 0, "val_accuracy": 0.5}\n')
    with pytest.raises(RunFolderError, match=rf"^{run / 'config.yaml'}: expands to more than 1,000,000 values"):
        ingest(tmp_path / "r.duckdb", [tmp_path / "runs"])
    with pytest.raises(SourceError, match=rf"^{run / 'config.yaml'}: expands to more than 1,000,000 values"):
        base_model_target(run)  # `corewarding evaluate --include-base` reads the same file
    claims = tmp_path / "claims.yaml"
    claims.write_text("claims: []\n" + billion_laughs())
    with pytest.raises(ClaimsError, match=rf"^{claims}: expands to more than 1,000,000 values"):
        load_claims(claims)
