"""The memory plan (``training/verl/plan.py``) checked against a measured run, phase by phase.

One CPU launch of verl's own trainer (``verl.platform=cpu``, two FSDP2 ranks, two vLLM replicas) with the tiny Qwen3
that has Qwen3's real vocabulary (``base_model=tiny-qwen3-vocab``: 151,936 rows, so the logits dominate as at 8B),
two steps, with the phase sampler on (``COREWARDING_PHASE_MEMORY``, ``training/verl/phase_memory.py``). On CPU a rank's
"device" is its process, so each phase's figure is the worker process's peak resident memory during the phase minus
its resident memory at the phase's start: the phase's own working set, which is what ``plan.phase_terms`` counts on
top of what is always resident. The rollout's figure is each vLLM engine process's peak resident memory minus its
size when it first appeared (imports done, no weights or KV cache yet), against the engine's budget on CPU: its
KV cache (``VLLM_CPU_KVCACHE_SPACE``) and its weights. The plan is evaluated for the shapes the run really had: each
phase's longest sequence (verl pads a micro-batch to its longest row on this path), the dtypes the run computes in
(bf16 logits under verl's mixed precision, fp32 vLLM weights), the run's micro-batches.

Prints phase | measured GB | plan GB | ratio and exits 1 if any phase is off by more than 25% of the measurement.
Usage: make memory-plan-check
       .venv-verl/bin/python perf/memory_plan_check.py [--method co_rewarding_2] [--out DIR] [--from DIR]
(``--from DIR`` re-evaluates a finished run's measurements without training again.)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from corewarding.training.verl import plan  # noqa: E402
from corewarding.training.verl.phase_memory import ENV  # noqa: E402

GB = plan.GB
TOLERANCE = 0.25
KV_CACHE_GB = 1  # VLLM_CPU_KVCACHE_SPACE for the run (cpu_platform.CPU_ENV's default)
PHASES = ("rollout", "old_log_prob", "ref_log_prob", "update", "save")


def overrides(method: str, out: Path) -> list[str]:
    return [
        "backend=verl",
        "experiment=tiny_cpu",
        "base_model=tiny-qwen3-vocab",
        f"method={method}",
        "verl.platform=cpu",
        "verl.n_gpus_per_node=2",
        "schedule.total_steps=2",
        "schedule.save_freq=1",
        "schedule.test_freq=100",
        "schedule.val_before_train=false",
        "grpo.micro_batch_size=4",
        "grpo.log_prob_micro_batch_size=4",
        "torch_threads=null",
        f"paths.runs_dir={out}",
        f"paths.artifacts_dir={out / 'artifacts'}",
    ]


class EngineWatch:
    """Resident memory of the run's vLLM engine processes (found by the phase folder in their environment)."""

    def __init__(self, tag: str) -> None:
        self.tag = tag
        self.first: dict[int, int] = {}
        self.peak: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        import psutil

        while not self._stop.is_set():
            for proc in psutil.process_iter(["name"]):
                name = proc.info["name"] or ""
                if not name.startswith("VLLM"):
                    continue
                try:
                    if proc.environ().get(ENV) != self.tag:
                        continue
                    rss = proc.memory_info().rss
                except (psutil.Error, OSError):
                    continue
                self.first.setdefault(proc.pid, rss)
                self.peak[proc.pid] = max(self.peak.get(proc.pid, 0), rss)
            self._stop.wait(0.1)

    def __enter__(self) -> EngineWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


def run(method: str, out: Path) -> None:
    """One launch with the sampler on; writes ``out/phases/rank_*.jsonl`` and ``out/phases/rollout.json``."""
    phases = out / "phases"
    phases.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        ENV: str(phases),
        "MALLOC_MMAP_THRESHOLD_": "65536",  # large tensors are mmap'd, and returned to the kernel when freed
        "OMP_NUM_THREADS": "1",
        "HF_HUB_OFFLINE": "1",
        "VLLM_CPU_KVCACHE_SPACE": str(KV_CACHE_GB),
        # this launch starts its own Ray head: with "clusters" off Ray gives the node the loopback address, which
        # verl hands its ranks as MASTER_ADDR (ray/_private/services.py ~811; rank 0's TCPStore listens on loopback)
        "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    }
    cmd = [str(Path(sys.executable).parent / "corewarding"), "train", "--run-dir", str(out / method)]
    cmd += overrides(method, out)
    log = out / "train.log"
    print(f"training ({log}) ...", flush=True)
    with EngineWatch(str(phases)) as watch, log.open("ab") as f:
        rc = subprocess.run(cmd, env=env, stdout=f, stderr=subprocess.STDOUT, check=False).returncode
    if rc != 0:
        raise SystemExit(f"corewarding train exited {rc}; see {log}")
    engines = [{"pid": p, "first": watch.first[p], "peak": watch.peak[p]} for p in watch.first]
    (phases / "rollout.json").write_text(json.dumps(engines))


def measured(out: Path) -> tuple[dict[str, float], dict[str, int]]:
    """Per phase: the largest increment (GB) over ranks and calls; and each phase's longest sequence."""
    inc: dict[str, float] = {}
    longest: dict[str, int] = {}
    for path in sorted((out / "phases").glob("rank_*.jsonl")):
        seen: set[str] = set()
        for line in path.read_text().splitlines():
            row = json.loads(line)
            name = row["phase"]
            if name == "update" and name not in seen:  # AdamW allocates its states in the first update
                seen.add(name)
                continue
            inc[name] = max(inc.get(name, 0.0), (row["peak"] - row["start"]) / GB)
            longest[name] = max(longest.get(name, 0), max(row["lengths"], default=0))
    engines = json.loads((out / "phases" / "rollout.json").read_text())
    if engines:
        inc["rollout"] = max((e["peak"] - e["first"]) / GB for e in engines)
    return inc, longest


def planned(method: str, out: Path, longest: dict[str, int]) -> dict[str, float]:
    """The plan's per-phase terms for the run's config and shapes (``plan.phase_terms``)."""
    from corewarding.config import compose_config
    from corewarding.training.verl.verl_config import to_verl_config

    cfg = compose_config(overrides(method, out))
    shape = plan.model_shape(cfg)
    facts = plan.VerlFacts.of(to_verl_config(cfg, out / method))  # bf16 logits, remove-padding, sdpa
    lp_tokens = max(longest.get("old_log_prob", 0), longest.get("ref_log_prob", 0))
    terms = plan.phase_terms(
        cfg, shape, facts, log_prob_tokens=lp_tokens or None, train_tokens=longest.get("update") or None
    )
    terms["update"] = terms.pop("train")
    # vLLM's CPU engine: its KV cache (VLLM_CPU_KVCACHE_SPACE) and its weights in the rollout dtype
    terms["rollout"] = KV_CACHE_GB + plan.DTYPE_BYTES[facts.rollout_dtype] * shape.params / GB
    return terms


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--method", default="co_rewarding_2")
    ap.add_argument("--out", type=Path, default=None, help="a folder for the run (default: a temporary one)")
    ap.add_argument("--from", dest="source", type=Path, default=None, help="a finished run's folder: no training")
    args = ap.parse_args()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"machine: {platform.processor() or platform.machine()}, {cores} cores, Python {platform.python_version()}")
    if args.source is not None:
        out = args.source.resolve()
    else:
        out = (args.out or Path(tempfile.mkdtemp(prefix="memory-plan-check-"))).resolve()
        started = time.perf_counter()
        run(args.method, out)
        print(f"trained in {time.perf_counter() - started:.0f} s ({out})")
    got, longest = measured(out)
    want = planned(args.method, out, longest)
    print(f"longest sequence per phase: {longest}")
    print(f"{'phase':<14} {'measured GB':>11} {'plan GB':>8} {'ratio':>6}")
    bad = []
    for name in PHASES:
        if name not in got:
            print(f"{name:<14} {'-':>11} {want.get(name, float('nan')):8.3f}   (not measured)")
            bad.append(name)
            continue
        m, p = got[name], want[name]
        ratio = p / m if m > 0 else float("inf")
        print(f"{name:<14} {m:11.3f} {p:8.3f} {ratio:6.2f}")
        if abs(p - m) > TOLERANCE * m:
            bad.append(name)
    if bad:
        print(f"outside {TOLERANCE:.0%} of the measurement: {', '.join(bad)}")
        return 1
    print(f"every phase within {TOLERANCE:.0%} of the measurement")
    return 0


if __name__ == "__main__":
    sys.exit(main())
