"""Fixtures of the Hub publishing tests: a tiny run trained on CPU (checkpoints at steps 1 and 2, an evaluation
table), and the in-memory Hub of tests/support/hub_server.py with the client pointed at it.

tests/ is not a package (and verl installs a top-level ``tests`` package), so the server module is loaded by path.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import huggingface_hub
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from corewarding.evaluation.outputs import METRIC_SCHEMA
from corewarding.evaluation.targets import folder_fingerprint

TOKEN = "hf_CANARYtoken0123456789abcdefghijklmnop"  # recognisable: must never show up in logs, output or files
SERVER_FILE = Path(__file__).resolve().parents[2] / "support" / "hub_server.py"


def _load_server_module() -> ModuleType:
    name = "corewarding_test_support_hub_server"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, SERVER_FILE)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # before exec: its dataclasses look their module up
        spec.loader.exec_module(module)
    return sys.modules[name]


hub_server_module = _load_server_module()


@pytest.fixture(scope="session")
def trained_run(artifacts_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Co-rewarding-I run of the tiny model: 2 GRPO steps on CPU, a checkpoint at each, then an evaluation table."""
    from corewarding.config import compose_config
    from corewarding.training.local.trainer import train

    runs = tmp_path_factory.mktemp("hub-runs")
    overrides = ["experiment=tiny_cpu", "method=co_rewarding_1", f"paths.artifacts_dir={artifacts_dir}",
                 f"paths.runs_dir={runs}", "schedule.total_steps=2", "schedule.save_freq=1",
                 "schedule.val_max_samples=2"]  # fmt: skip
    run_dir = train(compose_config(overrides), progress=False).run_dir
    write_eval(run_dir, eval_rows(run_dir))
    return run_dir


BENCHMARK_CHECKERS = [("math500", ("strict", "math_verify")), ("tiny", ("strict",)), ("ifeval", ("lm_eval",))]


def eval_rows(run_dir: Path) -> list[dict[str, Any]]:
    """Metric rows as `corewarding evaluate` writes them: the base model and steps 1-2; math500 under both math
    checkers, tiny under strict only, ifeval under its own tool. Values differ per step and checker."""
    rows = []
    for step in (None, 1, 2):
        revision = "base" if step is None else folder_fingerprint(run_dir / f"checkpoints/global_step_{step}/model")
        for bench, checkers in BENCHMARK_CHECKERS:
            for k, checker in enumerate(checkers):
                for j, metric in enumerate(("pass@1", "maj@4")):
                    value = 0.125 + 0.25 * (step or 0) / 2 + 0.03125 * k + 0.0625 * j
                    rows.append({"step": step, "benchmark": bench, "checker": checker, "metric": metric,
                                 "value": value, "ci_low": value - 0.1, "ci_high": value + 0.1, "n": 4,
                                 "num_problems": 16, "temperature": 0.8, "seed": 0, "model_revision": revision,
                                 "model": str(run_dir)})  # fmt: skip
    return rows


def write_eval(run_dir: Path, rows: list[dict[str, Any]]) -> None:
    (run_dir / "eval").mkdir(exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=METRIC_SCHEMA), run_dir / "eval" / "metrics.parquet")


@pytest.fixture
def run_copy(trained_run: Path, tmp_path: Path) -> Path:
    """A private copy of the trained run (same folder name, so the same cell), free to change."""
    return Path(shutil.copytree(trained_run, tmp_path / "runs" / trained_run.name))


@pytest.fixture
def set_eval() -> Callable[[Path, list[dict[str, Any]]], None]:
    return write_eval


@pytest.fixture
def make_eval_rows() -> Callable[[Path], list[dict[str, Any]]]:
    return eval_rows


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Any]:
    """The in-memory Hub (accepting only TOKEN), with HF_TOKEN, HF_ENDPOINT set and offline mode lifted for the test.

    tests/conftest.py sets HF_HUB_OFFLINE=1, which huggingface_hub reads into ``constants.HF_HUB_OFFLINE`` at
    import and checks before every request; only these tests, talking to 127.0.0.1, lift it.
    """
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.setattr(huggingface_hub.constants, "HF_TOKEN_PATH", str(tmp_path / "no-cached-token"))
    with hub_server_module.HubServer(token=TOKEN) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        yield server


@pytest.fixture
def token() -> str:
    return TOKEN
