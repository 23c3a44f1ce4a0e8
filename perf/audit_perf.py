"""The audit's overhead per checkpoint on CPU: everything but generation and scoring, measured in one run.

The tiny model is served under SMALL and then LARGE released repo ids of paper_v3 by the local Hub-API test server
(tests/support/hub_server.py); ``corewarding audit`` evaluates them with transformers on 4 problems of the tiny
benchmark, as a user runs it (a private Prefect server, one flow run per checkpoint, the ingest). Each command's
overhead is its wall time minus the generation and scoring seconds its units recorded (``unit.json`` timing). The
overhead per checkpoint is the slope between the two commands (what one more checkpoint costs); the fixed cost (the
Prefect server's start, the imports) is the rest. Reported beside the machine and its cores: the figures depend on
the CPU.
Usage: make audit-bench (.venv/bin/python perf/audit_perf.py [SMALL LARGE])
"""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

from huggingface_hub import HfApi

from corewarding.evaluation.targets import HUB_FILES
from corewarding.matrix import hub_repo_id, load_matrix
from corewarding.tiny.data import write_tiny_dataset
from corewarding.tiny.model import build_tiny_model

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _server() -> ModuleType:
    spec = importlib.util.spec_from_file_location("hub_server", ROOT / "tests" / "support" / "hub_server.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["hub_server"] = module
    spec.loader.exec_module(module)
    return module


def _unit_seconds(work: Path) -> float:
    """Generation and scoring seconds recorded by every unit of every audit under ``work/runs``."""
    total = 0.0
    for marker in work.glob("runs/*/released/eval/units/*/*/unit.json"):
        timing = json.loads(marker.read_text()).get("timing", {})
        total += float(timing.get("generation_seconds", 0.0)) + float(timing.get("scoring_seconds", 0.0))
    return total


def audit(work: Path, cells: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, generation + scoring seconds) of one ``corewarding audit`` over ``cells`` in a fresh folder."""
    write_tiny_dataset(work / "artifacts" / "tiny-data", n_train=64, n_test=16, seed=0)
    command = [
        str(BIN / "corewarding"), "audit", "--matrix", "paper_v3", "--cell", ",".join(cells), "--benchmarks", "tiny",
        "--generation", "transformers", "--config", f"results_db={work / 'results.duckdb'}", "benchmark.limit=4",
        "math_verify.workers=1", "bootstrap.samples=200",
    ]  # fmt: skip
    started = time.perf_counter()
    done = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"audit failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return wall, _unit_seconds(work)


def main(small: int = 2, large: int = 6) -> None:
    model = build_tiny_model(ROOT / "artifacts" / "tiny-model-sft300", sft_steps=300)
    cells = load_matrix("paper_v3").cells[:large]
    with tempfile.TemporaryDirectory() as tmp, _server().HubServer() as server:
        api = HfApi(endpoint=server.url, token="hf_bench")
        for cell in cells:
            api.create_repo(hub_repo_id(cell), exist_ok=True)
            api.upload_folder(repo_id=hub_repo_id(cell), folder_path=str(model), allow_patterns=HUB_FILES)
        env = {**os.environ, "HF_ENDPOINT": server.url, "HF_HUB_OFFLINE": "0", "HF_TOKEN": "hf_bench",
               "HF_HOME": f"{tmp}/hf", "PREFECT_HOME": f"{tmp}/prefect", "OMP_NUM_THREADS": "1"}  # fmt: skip
        figures = {}
        for count in (small, large):
            wall, inside = audit(Path(tmp) / f"audit-{count}", [c.cell_id for c in cells[:count]], env)
            figures[count] = (wall, inside, wall - inside)
    per_checkpoint = (figures[large][2] - figures[small][2]) / (large - small)
    fixed = figures[small][2] - small * per_checkpoint
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}"
    )
    for count, (wall, inside, overhead) in figures.items():
        print(f"{count} checkpoints: {wall:.1f} s wall, {inside:.1f} s generation + scoring, {overhead:.1f} s overhead "
              f"({overhead / count:.2f} s per checkpoint, the fixed cost included)")  # fmt: skip
    print(
        f"overhead per checkpoint (slope {small} -> {large}): {per_checkpoint:.2f} s; fixed per command: {fixed:.1f} s"
    )


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
