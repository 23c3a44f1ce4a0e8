"""The plug-ins register wherever verl is imported: a fresh interpreter (as a Ray worker is) finds them through
verl's own registries, by the ``verl.plugins`` entry point or by ``VERL_USE_EXTERNAL_MODULES``; and nothing of ours
imports vllm.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

PROBE = """
import json, logging, sys
# as in a Ray worker: a root handler on stderr, the root at WARNING
handler = logging.StreamHandler(sys.stderr)
handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
logging.getLogger().addHandler(handler)
logging.getLogger().setLevel(logging.WARNING)
import verl
logging.getLogger("corewarding.probe").info("an info line of ours")
from verl.workers.reward_manager.registry import REWARD_MANAGER_REGISTRY
from verl.experimental.reward_loop.reward_manager.registry import REWARD_MANAGER
found = {
    "batch": sorted(k for k in REWARD_MANAGER_REGISTRY if k.startswith("corewarding_")),
    "loop": sorted(k for k in REWARD_MANAGER if k.startswith("corewarding_")),
}
import corewarding.cli.verl, corewarding.training.verl.launch, corewarding.training.verl.runner
import corewarding.training.verl.trainer, corewarding.training.verl.worker, corewarding.training.verl.merge
found["gpu_modules"] = sorted(m for m in sys.modules if m.split(".")[0] in ("vllm", "flash_attn", "sglang"))
print(json.dumps(found))
"""
PLUGINS = "corewarding.training.verl.plugins"
ROUTES = {
    "entry-point": {},
    "external-modules": {"VERL_USE_EXTERNAL_PLUGINS": "none", "VERL_USE_EXTERNAL_MODULES": PLUGINS},
    "neither": {"VERL_USE_EXTERNAL_PLUGINS": "none"},
}
EXPECTED_BATCH = [
    "corewarding_co_rewarding_1", "corewarding_co_rewarding_2", "corewarding_co_rewarding_3", "corewarding_entropy",
    "corewarding_gt_grpo", "corewarding_majority_voting", "corewarding_self_certainty",
]  # fmt: skip


@pytest.fixture(scope="module")
def probes() -> dict[str, dict[str, list[str]]]:
    """Each route in its own fresh interpreter (concurrently: each imports verl, ~7 s)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("VERL_USE_EXTERNAL")}
    running = {
        name: subprocess.Popen(
            [sys.executable, "-W", "ignore", "-c", PROBE],
            env={**base, **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name, env in ROUTES.items()
    }
    out = {}
    for name, proc in running.items():
        stdout, stderr = proc.communicate(timeout=180)
        assert proc.returncode == 0, stderr[-2000:]
        out[name] = {**json.loads(stdout.strip().splitlines()[-1]), "stderr": stderr}
    return out


@pytest.mark.parametrize("route", ["entry-point", "external-modules"])
def test_import_verl_registers_the_plugins(route: str, probes: dict) -> None:
    assert probes[route]["batch"] == EXPECTED_BATCH
    assert probes[route]["loop"] == ["corewarding_gt"]


def test_without_either_route_nothing_is_registered(probes: dict) -> None:
    assert probes["neither"]["batch"] == [] and probes["neither"]["loop"] == []


def test_our_verl_modules_never_import_vllm(probes: dict) -> None:
    assert probes["entry-point"]["gpu_modules"] == []


BROKEN = """
import sys
sys.modules["corewarding.training.verl.rewards"] = None  # a real failing import inside the plug-in
import verl
from verl.workers.reward_manager.registry import REWARD_MANAGER_REGISTRY
print(sorted(k for k in REWARD_MANAGER_REGISTRY if k.startswith("corewarding_")))
"""


def test_a_broken_plugin_fails_import_verl_naming_the_module() -> None:
    """verl logs an entry point's exception at DEBUG and goes on; ours must stop ``import verl`` instead."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("VERL_USE_EXTERNAL")}
    proc = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", BROKEN], env=env, capture_output=True, text=True, timeout=180
    )
    assert proc.returncode != 0, f"import verl succeeded with a broken plug-in: {proc.stdout}"
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("corewarding.training.verl.plugins.PluginImportError: " + PLUGINS), last
    assert "corewarding.training.verl.rewards" in last and "ImportError" in last, last


def test_our_info_lines_reach_a_workers_log(probes: dict[str, dict[str, list[str]]]) -> None:
    """Ray forwards a worker's stderr to the run's log; the root logger there is at WARNING, and the plug-in lets the
    package's INFO lines through (a resume's fingerprints are read from them)."""
    assert "INFO corewarding.probe: an info line of ours" in probes["entry-point"]["stderr"]
