"""Seconds per training step of Co-rewarding-I, II and III on the tiny model, on CPU or CUDA, in the same run.

Co-rewarding-III does the rollouts of both of the others (the policy on both views as I, the EMA teacher sampling
as II, here on both views), so its target is: one III step <= one I step + one II step.

One LocalTrainer per method, built once (the tiny model, a 300-step warm start, is built once and cached in
``artifacts/``). Each round runs one step of every method, in turn, so a change of load hits all three; the first
round warms up and is left out. Reported: the median of ROUNDS rounds per method, wall seconds, beside the machine,
its core count and its load (the times depend on the CPU).
Usage: make step-bench (.venv/bin/python perf/step_perf.py [ROUNDS] [DEVICE]; DEVICE cpu, the default, or cuda)
"""

from __future__ import annotations

import logging
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

from transformers.utils import logging as transformers_logging

from corewarding.config import compose_config
from corewarding.training.local.trainer import LocalTrainer

METHODS = ("co_rewarding_1", "co_rewarding_2", "co_rewarding_3")
ROUNDS = 16


def trainer(method: str, runs: Path, device: str) -> LocalTrainer:
    """A tiny-model trainer of ``method`` whose schedule has room for the rounds."""
    overrides = [
        "experiment=tiny_cpu", f"method={method}", "base_model.tiny.sft_steps=300", f"paths.runs_dir={runs}",
        f"schedule.total_steps={ROUNDS + 2}", "torch_threads=1", f"device={device}",
    ]  # fmt: skip
    return LocalTrainer(compose_config(overrides), runs / method, progress=False)


def main() -> int:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else ROUNDS
    device = sys.argv[2] if len(sys.argv) > 2 else "cpu"
    logging.basicConfig(level=logging.WARNING)
    transformers_logging.disable_progress_bar()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    machine = platform.processor() or platform.machine()
    print(f"machine: {machine}, {cores} cores, Python {platform.python_version()}, load {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as tmp:
        trainers = {m: trainer(m, Path(tmp), device) for m in METHODS}
        times: dict[str, list[float]] = {m: [] for m in METHODS}
        for step in range(1, rounds + 2):
            for method, t in trainers.items():
                start = time.perf_counter()
                t.train_step(step)
                if step > 1:  # the first round warms up
                    times[method].append(time.perf_counter() - start)
    median = {m: statistics.median(v) for m, v in times.items()}
    for method, seconds in median.items():
        print(f"{method}: {seconds:.3f} s per step on {device} (median of {rounds}, one CPU thread)")
    budget = median["co_rewarding_1"] + median["co_rewarding_2"]
    ok = median["co_rewarding_3"] <= budget
    print(f"co_rewarding_3 / (co_rewarding_1 + co_rewarding_2) = {median['co_rewarding_3'] / budget:.2f} "
          f"(target <= 1.00) {'ok' if ok else 'OVER TARGET'}")  # fmt: skip
    print(f"load after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
