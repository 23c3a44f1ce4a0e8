"""Shared test setup: offline environment, the shared data folder, a tiny model built once per session."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from pathlib import Path

import pytest
import torch

from tests.support.repo import TEST_CACHE_ENV

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("WANDB_MODE", "disabled")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
for _machine_key in ("COREWARDING_POOL_KEY", "COREWARDING_POOL_KEY_FILE"):  # a test makes its own pool key, if any
    os.environ.pop(_machine_key, None)
# Two test processes share the cores: one torch thread each (and in every subprocess), no oversubscription.
os.environ.setdefault("OMP_NUM_THREADS", "1")
torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
# Started as a background job of a non-interactive shell (`(make test &)`), this process and every child it starts would
# ignore SIGINT, and the tests that press Ctrl-C on a child (the worker, `pipeline run`, a dvc call) would wait in vain.
# A Python handler, unlike SIG_IGN, is reset to the default at exec, so the children get Ctrl-C back too.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"


_CACHE_OWNER: list[Path] = []


def pytest_configure(config: pytest.Config) -> None:
    """One cache folder for the whole session (the xdist workers inherit it): the demo's tiny model for clones."""
    if TEST_CACHE_ENV not in os.environ:
        _CACHE_OWNER.append(Path(tempfile.mkdtemp(prefix="corewarding-test-cache-")))
        os.environ[TEST_CACHE_ENV] = str(_CACHE_OWNER[0])


def pytest_unconfigure(config: pytest.Config) -> None:
    for folder in _CACHE_OWNER:
        shutil.rmtree(folder, ignore_errors=True)
        os.environ.pop(TEST_CACHE_ENV, None)


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
