"""Wall time of verl's CPU end-to-end run (``make verl-e2e``), per method and in all, with what a launch costs.

Runs ``tests/verl_e2e/test_verl_cpu.py`` in ``.venv-verl`` (build it first: ``make verl-e2e`` or
``make .venv-verl/.installed``) for the methods given (default: all seven), with a JUnit report and a kept
temporary folder. Per method it prints the test's wall seconds (two launches: killed after the step-2 save, then
resumed to step 4; plus a two-step local run for the metric names), the training seconds verl logged for its four
steps (``step_seconds`` in metrics.jsonl), and the rest per launch: start-up and shutdown (Ray actors, imports in
about ten processes, two vLLM engines), the figure to beat. Beside the machine, its cores and its load (the times
depend on the CPU and on what else runs).
Usage: make verl-e2e-bench (.venv-verl/bin/python perf/verl_e2e_perf.py [method,method,...])
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TEST = "tests/verl_e2e/test_verl_cpu.py"
LAUNCHES = 2


def step_seconds(basetemp: Path, method: str) -> float:
    files = sorted(basetemp.glob(f"test_two_steps_save_kill_resum*/runs/{method}/metrics.jsonl"))
    if not files:
        return float("nan")
    rows = [json.loads(line) for line in files[-1].read_text().splitlines() if line.strip()]
    return sum(float(r.get("step_seconds", 0.0)) for r in rows)


def main() -> int:
    methods = sys.argv[1] if len(sys.argv) > 1 else ""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    machine = platform.processor() or platform.machine()
    print(f"machine: {machine}, {cores} cores, Python {platform.python_version()}, load {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory(prefix="verl-e2e-bench-") as tmp:
        basetemp, report = Path(tmp) / "pt", Path(tmp) / "junit.xml"
        env = {**os.environ, "HF_HUB_OFFLINE": "1", **({"VERL_E2E_METHODS": methods} if methods else {})}
        cmd = [sys.executable, "-m", "pytest", TEST, "-q", "-p", "no:cacheprovider", f"--basetemp={basetemp}",
               f"--junitxml={report}"]  # fmt: skip
        started = time.perf_counter()
        rc = subprocess.run(cmd, cwd=REPO, env=env, check=False).returncode
        total = time.perf_counter() - started
        print(f"{'method':<16} {'test s':>8} {'train s':>8} {'rest per launch s':>18}  outcome")
        for case in ET.parse(report).getroot().iter("testcase"):
            method = case.get("name", "").split("[")[-1].rstrip("]")
            wall = float(case.get("time", "nan"))
            train = step_seconds(basetemp, method)
            outcome = "failed" if case.find("failure") is not None or case.find("error") is not None else "passed"
            print(f"{method:<16} {wall:8.1f} {train:8.1f} {(wall - train) / LAUNCHES:18.1f}  {outcome}")
        print(f"all: {total:.1f} s wall (pytest exit {rc}), load {os.getloadavg()[0]:.2f} at the end")
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
