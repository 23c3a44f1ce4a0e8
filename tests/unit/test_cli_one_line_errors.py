"""Mistakes a tired researcher makes end in one line and exit 2, through the real command line: two ground truths for
one question, an output path that is a folder, a run folder whose name is too long for the file system."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from corewarding.cli.errors import THIRD_PARTY_NAMES, one_line_errors, run_reporting_errors
from corewarding.errors import ExpectedError

ROOT = Path(__file__).resolve().parents[2]


def corewarding(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]), "HF_HUB_OFFLINE": "1"}
    cmd = [sys.executable, "-m", "corewarding.cli", *args]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def rollouts(path: Path, truths: list[str]) -> Path:
    rows = [{"uid": "q1", "view": "original", "response": f"so \\boxed{{{t}}}", "ground_truth": t} for t in truths]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_two_ground_truths_for_one_uid_name_both_lines(tmp_path: Path) -> None:
    source = rollouts(tmp_path / "in.jsonl", ["1", "1", "2"])
    for method in ("gt_grpo", "majority_voting"):
        done = corewarding("rewards", "score", "--method", method, "--input", "in.jsonl", "--output", "out.jsonl",
                           cwd=tmp_path)  # fmt: skip
        assert done.returncode == 2 and "Traceback" not in done.stderr
        assert done.stderr.strip().splitlines() == [
            "error: in.jsonl:3: uid 'q1' has ground_truth '2', but line 1 gives it '1'; one question has one answer "
            "(were two files merged?)"
        ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]
    assert source.read_text().count("\n") == 3


def test_an_output_folder_is_refused_in_one_line(tmp_path: Path) -> None:
    rollouts(tmp_path / "in.jsonl", ["1"])
    (tmp_path / "out").mkdir()
    done = corewarding("rewards", "score", "--method", "gt_grpo", "--input", "in.jsonl", "--output", "out",
                       cwd=tmp_path)  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == ["error: --output out is a folder; name the JSON lines file to write"]
    assert list((tmp_path / "out").iterdir()) == [] and len(list(tmp_path.iterdir())) == 2  # no temp file left


def test_a_run_dir_name_too_long_is_one_line(tmp_path: Path) -> None:
    run_dir = tmp_path / ("r" * 300)
    done = corewarding("train", "experiment=tiny_cpu", f"paths.artifacts_dir={tmp_path}/a", "schedule.total_steps=1",
                       "--run-dir", str(run_dir), cwd=tmp_path)  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert done.stderr.strip().splitlines()[-1] == f"error: {run_dir}: File name too long"


# Our errors that the command line prints as one line, by the module that defines each.
OURS = (
    ("corewarding.schemas.reading", "ConfigError"),
    ("corewarding.files", "SourceError"),
    ("corewarding.pipeline.dvc", "DvcError"),
    ("corewarding.checkpoint_manifest", "CheckpointError"),
    ("corewarding.training.errors", "RunInUseError"),
    ("corewarding.training.errors", "RunWriteError"),
    ("corewarding.training.errors", "LegacyCheckpointError"),
    ("corewarding.runtime.pool_checks", "PoolError"),
    ("corewarding.pipeline.store.local_disk", "StoreError"),
    ("corewarding.pipeline.pool_key", "PoolKeyError"),
)


@pytest.mark.parametrize(("module", "name"), OURS)
def test_each_of_our_one_line_errors_derives_from_expected_error(module: str, name: str) -> None:
    """The CLI catches ExpectedError (issue 46): a class that lost the base would be a traceback again."""
    cls = getattr(importlib.import_module(module), name)
    assert isinstance(cls, type) and issubclass(cls, ExpectedError) and cls.__module__ == module


@pytest.mark.parametrize(("module", "name"), THIRD_PARTY_NAMES)
def test_each_third_party_one_line_error_is_named_by_the_module_that_defines_it(module: str, name: str) -> None:
    """The CLI looks them up among the loaded modules instead of importing them (issue 45): the class must be defined
    there, or one raised while that module is not loaded would be a traceback; a renamed class fails here too."""
    cls = getattr(importlib.import_module(module), name)
    assert isinstance(cls, type) and issubclass(cls, Exception) and cls.__module__ == module
    assert cls in one_line_errors()


def test_an_error_without_the_base_goes_on_up() -> None:
    def fail() -> int:
        raise RuntimeError("a bug, not a message for the user")

    with pytest.raises(RuntimeError, match="a bug"):
        run_reporting_errors(fail)


def test_a_loaded_one_line_error_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from corewarding.config import ConfigError

    def fail() -> int:
        raise ConfigError("optimizer.lr: must be positive")

    assert run_reporting_errors(fail) == 2
    assert capsys.readouterr().err == "error: optimizer.lr: must be positive\n"
