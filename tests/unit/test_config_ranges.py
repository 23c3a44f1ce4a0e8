"""Optimiser and schedule values that would crash a run later (or train nonsense) stop `train --dry-run` at once: one
line naming the key and the value, exit 2, for both backends; every shipped matrix cell passes the same check."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from corewarding import config
from corewarding.config import compose_config
from corewarding.matrix import load_matrix

ROOT = Path(__file__).resolve().parents[2]
BAD = [
    ("optimizer.lr=inf", "optimizer.lr=inf: must be finite and > 0"),
    ("optimizer.lr=nan", "optimizer.lr=nan: must be finite and > 0"),
    ("optimizer.lr=0", "optimizer.lr=0: must be finite and > 0"),
    ("optimizer.betas=[2,3]", "optimizer.betas=[2, 3]: must be two numbers, each in [0, 1)"),
    ("optimizer.betas=[0.9]", "optimizer.betas=[0.9]: must be two numbers, each in [0, 1)"),
    ("optimizer.eps=-1e-8", "optimizer.eps=-1e-08: must be finite and > 0"),
    ("optimizer.weight_decay=-inf", "optimizer.weight_decay=-inf: must be finite and >= 0"),
    ("optimizer.grad_clip=inf", "optimizer.grad_clip=inf: must be finite and > 0"),
    ("optimizer.min_lr_ratio=1.5", "optimizer.min_lr_ratio=1.5: must be in [0, 1]"),
    ("schedule.val_max_samples=-5", "schedule.val_max_samples=-5: must be a whole number >= 1, or null"),
    ("schedule.save_freq=2.5", "schedule.save_freq=2.5: must be a whole number >= 1"),
    ("grpo.kl_coef=inf", "grpo.kl_coef=inf: must be >= 0"),
]


def _dry_run(*overrides: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]), "HF_HUB_OFFLINE": "1"}
    cmd = [sys.executable, "-m", "corewarding.cli", "train", *overrides, f"paths.runs_dir={cwd}", "--dry-run"]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(("override", "message"), BAD, ids=[b[0] for b in BAD])
def test_a_bad_value_names_key_and_value(override: str, message: str) -> None:
    from corewarding.config import ConfigError

    with pytest.raises(ConfigError) as caught:
        compose_config([override])
    assert str(caught.value) == message


@pytest.mark.parametrize("backend", ["local", "verl"])
def test_the_dry_run_stops_in_one_line(backend: str, tmp_path: Path) -> None:
    extra = ["base_model=qwen3-1.7b-base", "dataset=math"] if backend == "verl" else []
    for override, message in [BAD[0], BAD[3], BAD[9]]:
        done = _dry_run(f"backend={backend}", *extra, override, cwd=tmp_path)
        assert done.returncode == 2, done.stderr
        assert done.stderr.strip().splitlines() == [f"error: {message}"]
    assert list(tmp_path.iterdir()) == []


def test_every_shipped_cell_passes() -> None:
    for name in ("paper", "demo"):
        matrix = load_matrix(name)
        for cell in matrix.cells:
            cfg = compose_config([*matrix.overrides, *matrix.train_overrides, *cell.overrides()])
            assert cfg.optimizer.lr > 0


@pytest.mark.parametrize(
    ("config_name", "overrides"),
    [
        ("config", ["method=co_rewarding_2", "base_model=qwen3-8b-base", "dataset=math", "backend=verl"]),
        ("config", ["experiment=tiny_cpu", "method=co_rewarding_1"]),
        ("eval", []),
        ("data", ["datasource=math"]),
        ("pipeline", []),
        ("audit", []),
        ("cost", []),
    ],
)
def test_leaving_out_hydras_own_groups_changes_no_config(
    config_name: str, overrides: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """compose_config drops Hydra's logging, output, launcher and help groups before composing (config.HYDRA_OWN, a
    third of a composition's time); what it returns equals the composition with them."""
    lean = OmegaConf.to_container(compose_config(overrides, config_name=config_name))
    monkeypatch.setattr(config, "HYDRA_OWN", ())
    assert lean == OmegaConf.to_container(compose_config(overrides, config_name=config_name))
