"""Resume only from a complete, intact checkpoint: a missing, damaged or truncated newest one is reported by path and
the one before it is used; with none left, `corewarding train` stops with one line and a nonzero exit."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file

from corewarding.cli import main
from corewarding.config import compose_config
from corewarding.training.local.trainer import LocalTrainer
from tests.support.tiny_checkpoints import CELL, overrides, runs_copy, step_dir, trained_runs  # noqa: F401


def resume(artifacts: Path, runs: Path) -> LocalTrainer:
    return LocalTrainer(compose_config(overrides(artifacts, runs)), runs / CELL, progress=False)


def assert_resumed_from_step_1(trainer: LocalTrainer, runs: Path) -> None:
    assert trainer.start_step == 1
    saved = load_file(str(step_dir(runs, 1) / "model" / "model.safetensors"))
    loaded = trainer.policy.state_dict()
    assert all(torch.equal(loaded[k], v) for k, v in saved.items() if k in loaded)
    assert [line for line in (runs / CELL / "metrics.jsonl").read_text().splitlines() if '"step": 2' in line] == []


def flip_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) * 3 // 4] ^= 0xFF  # inside the tensor data, past the header
    path.write_bytes(bytes(data))


def test_missing_model_config_falls_back_to_the_previous_checkpoint(
    artifacts_dir: Path, runs: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (step_dir(runs, 2) / "model" / "config.json").unlink()
    with caplog.at_level(logging.WARNING):
        trainer = resume(artifacts_dir, runs)
    assert_resumed_from_step_1(trainer, runs)
    assert any(str(step_dir(runs, 2)) in r.getMessage() and "config.json" in r.getMessage() for r in caplog.records)


def test_flipped_bytes_in_the_weights_fall_back_to_the_previous_checkpoint(
    artifacts_dir: Path, runs: Path, caplog: pytest.LogCaptureFixture
) -> None:
    flip_byte(step_dir(runs, 2) / "model" / "model.safetensors")
    with caplog.at_level(logging.WARNING):
        trainer = resume(artifacts_dir, runs)
    assert_resumed_from_step_1(trainer, runs)
    assert any(str(step_dir(runs, 2)) in r.getMessage() and "SHA-256" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("damage", ["empty", "truncated"])
def test_empty_or_truncated_trainer_state_falls_back(artifacts_dir: Path, runs: Path, damage: str) -> None:
    path = step_dir(runs, 2) / "trainer.safetensors"
    path.write_bytes(b"" if damage == "empty" else path.read_bytes()[:100])
    assert_resumed_from_step_1(resume(artifacts_dir, runs), runs)


def test_an_unreadable_unverified_checkpoint_falls_back_even_when_trusted(artifacts_dir: Path, runs: Path) -> None:
    """--trust-unverified loads a checkpoint without a manifest; if it cannot be read, the one before."""
    from corewarding.training.local.checkpoint import MANIFEST

    (step_dir(runs, 2) / MANIFEST).unlink()
    (step_dir(runs, 2) / "trainer.json").write_bytes(b"{garbage")
    cfg = compose_config(overrides(artifacts_dir, runs))
    assert_resumed_from_step_1(LocalTrainer(cfg, runs / CELL, progress=False, trust_unverified=True), runs)


def test_no_complete_checkpoint_stops_with_one_line(
    artifacts_dir: Path, runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (step_dir(runs, 2) / "model" / "config.json").unlink()
    (step_dir(runs, 1) / "trainer.safetensors").write_bytes(b"")
    metrics = (runs / CELL / "metrics.jsonl").read_bytes()
    code = main(["train", *overrides(artifacts_dir, runs)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err[-1].startswith("error: ") and "no complete checkpoint" in err[-1] and str(runs / CELL) in err[-1]
    assert (runs / CELL / "metrics.jsonl").read_bytes() == metrics  # nothing was trained over


def test_every_checkpoint_carries_a_verified_manifest(runs: Path) -> None:
    from corewarding.training.local.checkpoint import MANIFEST, manifest_problem

    for step in (1, 2):
        assert (step_dir(runs, step) / MANIFEST).is_file()
        assert manifest_problem(step_dir(runs, step)) is None


# ---- issue 23: a checkpoint cannot run code, and an unverified one is not trusted ----------------------------------


class RunsCommand:
    """Unpickling this touches ``marker``: what a crafted object in a pickle checkpoint could do instead."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (Path.touch, (self.marker,))


def make_legacy(folder: Path, trainer: Any) -> None:
    """Turn ``folder`` into an old-format checkpoint holding ``trainer`` as ``trainer.pt``, with a manifest rewritten
    to match (whoever can write a checkpoint can rewrite its manifest)."""
    from corewarding.training.local.checkpoint import write_manifest

    for name in ("trainer.safetensors", "trainer.json"):
        (folder / name).unlink(missing_ok=True)
    torch.save(trainer, folder / "trainer.pt")
    write_manifest(folder)


def test_a_crafted_pickle_checkpoint_runs_nothing_and_stops_with_one_line(
    artifacts_dir: Path, runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    marker = tmp_path / "code-ran"
    make_legacy(step_dir(runs, 2), {"optimizer": RunsCommand(marker), "scheduler": {}, "rng": {}})
    metrics = (runs / CELL / "metrics.jsonl").read_bytes()
    code = main(["train", *overrides(artifacts_dir, runs)])
    err = capsys.readouterr().err.strip().splitlines()
    assert not marker.exists()
    assert code == 2
    assert err[-1].startswith("error: ") and str(step_dir(runs, 2)) in err[-1] and "checkpoint convert" in err[-1]
    assert (runs / CELL / "metrics.jsonl").read_bytes() == metrics  # nothing was trained over
    # The conversion reads the pickle under torch's allow-list: the crafted object is refused, not run.
    assert main(["checkpoint", "convert", str(step_dir(runs, 2))]) == 2
    assert not marker.exists() and "refused" in capsys.readouterr().err


def test_an_old_pickle_checkpoint_converts_and_resumes_exactly(artifacts_dir: Path, runs: Path) -> None:
    from corewarding.training.local.safe_state import load_state

    folder = step_dir(runs, 2)
    state = load_state(folder / "trainer.safetensors", folder / "trainer.json")
    make_legacy(folder, state)
    assert main(["checkpoint", "convert", str(folder)]) == 0
    assert not (folder / "trainer.pt").exists()
    trainer = resume(artifacts_dir, runs)
    assert trainer.start_step == 2
    optimizer = trainer.optimizer.state_dict()["state"]
    for index, saved in state["optimizer"]["state"].items():
        assert all(torch.equal(optimizer[index][k], v) for k, v in saved.items())


def test_a_deleted_manifest_does_not_resume_unverified_weights(
    artifacts_dir: Path, runs: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from corewarding.training.local.checkpoint import MANIFEST

    (step_dir(runs, 2) / MANIFEST).unlink()
    flip_byte(step_dir(runs, 2) / "model" / "model.safetensors")
    with caplog.at_level(logging.WARNING):
        trainer = resume(artifacts_dir, runs)
    assert_resumed_from_step_1(trainer, runs)
    assert any(str(step_dir(runs, 2)) in r.getMessage() and MANIFEST in r.getMessage() for r in caplog.records)


def test_no_manifest_anywhere_stops_with_one_line_unless_trusted(
    artifacts_dir: Path, runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from corewarding.training.local.checkpoint import MANIFEST

    for step in (1, 2):
        (step_dir(runs, step) / MANIFEST).unlink()
    assert main(["train", *overrides(artifacts_dir, runs)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: ") and "--trust-unverified" in err[-1] and str(runs / CELL) in err[-1]
    cfg = compose_config(overrides(artifacts_dir, runs))
    assert LocalTrainer(cfg, runs / CELL, progress=False, trust_unverified=True).start_step == 2


def test_evaluation_refuses_a_checkpoint_that_differs_from_its_manifest(runs: Path) -> None:
    from corewarding.evaluation.targets import run_targets
    from corewarding.training.errors import CheckpointError

    assert [t.step for t in run_targets(runs / CELL)] == [1, 2]
    flip_byte(step_dir(runs, 2) / "model" / "model.safetensors")
    with pytest.raises(CheckpointError, match=rf"{step_dir(runs, 2)}: not evaluated, .*SHA-256"):
        run_targets(runs / CELL)
