"""Compose the project's Hydra configuration (configs/) from Python, the CLI and tests."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig, OmegaConf

CONFIG_DIR_ENV = "COREWARDING_CONFIG_DIR"


def config_dir() -> Path:
    """The configs/ folder: $COREWARDING_CONFIG_DIR, else the one at the repository root."""
    override = os.environ.get(CONFIG_DIR_ENV)
    path = Path(override) if override else Path(__file__).resolve().parents[2] / "configs"
    if not (path / "config.yaml").is_file():
        raise FileNotFoundError(f"no Hydra config at {path}/config.yaml (set {CONFIG_DIR_ENV})")
    return path


def compose_config(overrides: Sequence[str] = ()) -> DictConfig:
    """Compose configs/config.yaml with Hydra overrides and resolve every interpolation."""
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        cfg = compose(config_name="config", overrides=list(overrides))
    OmegaConf.resolve(cfg)
    return cfg


def load_group_option(group: str, option: str) -> DictConfig:
    """Read one option file of a config group (e.g. method/gt_grpo) without composing the whole tree."""
    path = config_dir() / group / f"{option}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in (config_dir() / group).glob("*.yaml"))
        raise KeyError(f"unknown {group} {option!r}; known: {', '.join(known)}")
    loaded = OmegaConf.load(path)
    assert isinstance(loaded, DictConfig)
    return loaded
