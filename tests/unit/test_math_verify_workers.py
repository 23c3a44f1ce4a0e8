"""math-verify workers default to the machine's cores (issue 15, item 9): null resolves to the core count in one place,
an explicit number is kept, and 0 or a negative number is a config error naming the key."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from corewarding.cli import main
from corewarding.config import ConfigError, compose_config
from corewarding.evaluation.eval_config import benchmark_configs
from corewarding.grading.equivalence import MathVerifyChecker, default_workers, resolve_workers

CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def test_null_resolves_to_the_core_count_and_a_number_is_kept() -> None:
    assert default_workers() == CORES
    assert resolve_workers(None) == CORES
    assert resolve_workers(3) == 3
    assert MathVerifyChecker(None).workers == CORES  # no process starts before the first check
    assert MathVerifyChecker(5).workers == 5


@pytest.mark.parametrize("bad", [0, -2, True, "4"])
def test_resolve_refuses_what_is_not_a_positive_integer(bad: object) -> None:
    with pytest.raises(ValueError, match=r"workers=.*must be an integer >= 1, or null"):
        resolve_workers(bad)  # type: ignore[arg-type]


def test_eval_config_defaults_to_null_and_keeps_an_explicit_number() -> None:
    assert compose_config([], config_name="eval").math_verify.workers is None
    (cfg,) = benchmark_configs(["tiny"], ["math_verify.workers=6"])
    assert cfg.math_verify.workers == 6
    (cfg,) = benchmark_configs(["tiny"], [])  # null passes the check; the checker resolves it
    assert resolve_workers(cfg.math_verify.workers) == CORES


@pytest.mark.parametrize("bad", ["0", "-1"])
def test_eval_config_names_a_bad_worker_count(bad: str) -> None:
    with pytest.raises(ConfigError, match=rf"math_verify\.workers={bad}: must be an integer >= 1, or null"):
        benchmark_configs(["tiny"], [f"math_verify.workers={bad}"])


def test_training_vote_config_accepts_null_and_names_zero() -> None:
    assert compose_config(["vote.math_verify_workers=null"]).vote.math_verify_workers is None
    with pytest.raises(ConfigError, match=r"vote\.math_verify_workers=0"):
        compose_config(["vote.math_verify_workers=0"])


def test_rewards_score_refuses_zero_workers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"uid": "a", "view": "original", "response": "\\boxed{1}", "ground_truth": "1"}) + "\n")
    args = ["rewards", "score", "--method", "majority_voting", "--input", str(src), "--output", str(tmp_path / "o")]
    assert main([*args, "--canonicalize", "math_verify", "--math-verify-workers", "0"]) == 2
    assert "--math-verify-workers: workers=0: must be an integer >= 1" in capsys.readouterr().err
