"""Shared test setup: offline environment, the shared data folder, a tiny model built once per session."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("WANDB_MODE", "disabled")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """../shared/data, or a skip with the reason (a fresh clone elsewhere has no ../shared)."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data folder {SHARED_DATA} is absent")
    return SHARED_DATA


@pytest.fixture(scope="session")
def artifacts_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One artifacts folder per test session, so the tiny model and data are built once."""
    return tmp_path_factory.mktemp("artifacts")


def _missing(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is None


# Hardware and optional-dependency skips, declared once by marker name.
SKIPS = {
    "requires_gpu": (lambda: not torch.cuda.is_available(), "needs a CUDA device (none visible)"),
    "requires_vllm": (lambda: _missing("vllm"), "needs vllm (install the gpu extra)"),
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        for marker, (should_skip, reason) in SKIPS.items():
            if item.get_closest_marker(marker) and should_skip():
                item.add_marker(pytest.mark.skip(reason=reason))
