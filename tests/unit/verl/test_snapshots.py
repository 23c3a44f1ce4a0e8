"""configs/snapshots/verl/ holds every paper cell's resolved verl config, byte for byte what the generator
writes now: a change to our configs, the translation or verl's defaults must come with regenerated snapshots
(`corewarding config snapshot`), so it shows in review as a diff.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from corewarding.cli import main
from corewarding.matrix import load_matrix
from corewarding.training.verl.snapshot import default_dir, snapshots, stale_snapshots, write_snapshots

pytestmark = pytest.mark.slow  # 72 configs of ~1,100 lines, resolved by OmegaConf: ~20 s


@pytest.fixture(scope="module")
def fresh() -> dict[str, str]:
    return snapshots("paper_v3")


def test_committed_snapshots_are_current(fresh: dict[str, str]) -> None:
    problems = stale_snapshots(default_dir(), "paper_v3", fresh)
    assert not problems, f"{problems[:5]}: run `corewarding config snapshot` and commit configs/snapshots/verl/"
    assert sorted(fresh) == sorted(f"{c.cell_id}.yaml" for c in load_matrix("paper_v3").cells)


def test_snapshots_hold_nothing_machine_specific(fresh: dict[str, str]) -> None:
    machine = [str(Path(__file__).resolve().parents[3]), os.path.expanduser("~"), os.getcwd()]
    for name, text in fresh.items():
        assert not [m for m in machine if m in text], name
        assert "runs/" + name.removesuffix(".yaml") + "/checkpoints" in text


def test_check_names_changed_missing_and_extra_files(
    fresh: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    names = write_snapshots(tmp_path, "paper_v3", fresh)
    assert len(names) == 72 and stale_snapshots(tmp_path, "paper_v3", fresh) == []
    (tmp_path / names[0]).write_text(fresh[names[0]].replace("lr: 3.0e-06", "lr: 1.0e-06"))
    (tmp_path / names[1]).unlink()
    (tmp_path / "old_cell.yaml").write_text("x: 1\n")
    assert stale_snapshots(tmp_path, "paper_v3", fresh) == [
        f"missing {names[1]}",
        "extra old_cell.yaml",
        f"changed {names[0]}",
    ]
    write_snapshots(tmp_path, "paper_v3", fresh)
    assert not (tmp_path / "old_cell.yaml").exists() and stale_snapshots(tmp_path, "paper_v3", fresh) == []


def test_cli_check_fails_on_a_stale_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "extra.yaml").write_text("x: 1\n")
    assert main(["config", "snapshot", "--matrix", "demo", "--out", str(tmp_path), "--check"]) == 1
    assert "missing gt_grpo__tiny__tiny.yaml" in capsys.readouterr().out
    assert main(["config", "snapshot", "--matrix", "demo", "--out", str(tmp_path)]) == 0
    assert main(["config", "snapshot", "--matrix", "demo", "--out", str(tmp_path), "--check"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir())[0] == "co_rewarding_1__tiny__tiny.yaml"
