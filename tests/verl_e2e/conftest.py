"""verl's CPU end-to-end run (``make verl-e2e``): one Ray head for every launch, the tiny Qwen3 built once, and a
watch on every socket the run's processes listen on.

Skipped, with the reason, where vLLM's CPU build is not installed: ``make test`` runs in ``.venv``, which lacks it;
``make verl-e2e`` runs these tests in ``.venv-verl``, which has it.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.net import free_port
from tests.support.verl_e2e import SFT_STEPS, TAG_ENV, ListenWatch, stop_tagged

RANKS = 2
REPO_ROOT = Path(__file__).resolve().parents[2]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if importlib.util.find_spec("vllm") is not None:
        return
    skip = pytest.mark.skip(reason="needs vLLM's CPU build and verl: run `make verl-e2e` (its own venv, .venv-verl)")
    here = Path(__file__).parent  # this hook sees every collected item: only this folder's need vLLM
    for item in items:
        if Path(item.path).is_relative_to(here):
            item.add_marker(skip)


@pytest.fixture(scope="session")
def e2e_env() -> dict[str, str]:
    """The environment of every process the run starts: offline, one torch thread each, tagged."""
    bin_dir = str(Path(sys.executable).parent)
    return {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ.get('PATH', '')}",
        "HF_HUB_OFFLINE": "1",
        "WANDB_MODE": "disabled",
        "OMP_NUM_THREADS": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "RAY_USAGE_STATS_ENABLED": "0",
        "RAY_AUTH_MODE": "disabled",
        "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",  # Ray's one-node mode: its node address is loopback, not the NIC's
        TAG_ENV: uuid.uuid4().hex,
    }


@pytest.fixture(scope="session")
def ray_head(e2e_env: dict[str, str]) -> Iterator[str]:
    """A Ray head on 127.0.0.1 with one logical GPU per rank, shared by every launch (saves its start-up each time)."""
    temp_dir = Path(tempfile.mkdtemp(prefix="ray-e2e-", dir="/tmp"))  # Ray's socket paths must stay short
    port = free_port()
    ray = str(Path(sys.executable).parent / "ray")
    start = [
        ray, "start", "--head", "--node-ip-address=127.0.0.1", f"--port={port}", f"--num-gpus={RANKS}",
        "--num-cpus=16", "--include-dashboard=false", "--disable-usage-stats", f"--temp-dir={temp_dir}",
    ]  # fmt: skip
    # a SIGTERM (a CI job's timeout, `kill`) unwinds like Ctrl-C: the launches and this Ray head are stopped
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        subprocess.run(start, env=e2e_env, check=True, capture_output=True, timeout=180)
        yield f"127.0.0.1:{port}"
    finally:
        # only this session's processes (the head and whatever it started carry the run's tag), never `ray stop
        # --force`, which stops every Ray on the machine
        stop_tagged(e2e_env[TAG_ENV])
        shutil.rmtree(temp_dir, ignore_errors=True)
        signal.signal(signal.SIGTERM, previous)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@pytest.fixture(scope="session")
def listen_watch(e2e_env: dict[str, str], ray_head: str) -> Iterator[ListenWatch]:
    with ListenWatch(e2e_env[TAG_ENV]) as watch:
        watch.sample()
        yield watch


@pytest.fixture(scope="session")
def tiny_qwen3(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The artifacts folder holding the tiny Qwen3 (and the tiny data), built once before the first launch."""
    from omegaconf import OmegaConf

    from corewarding.tiny.model import build_tiny_model

    artifacts = tmp_path_factory.mktemp("artifacts")
    spec = OmegaConf.to_container(OmegaConf.load(REPO_ROOT / "configs" / "base_model" / "tiny-qwen3.yaml"))
    tiny = {**spec["base_model"]["tiny"], "sft_steps": SFT_STEPS}  # type: ignore[index]
    build_tiny_model(artifacts / f"tiny-qwen3-sft{SFT_STEPS}", **tiny)
    return artifacts
