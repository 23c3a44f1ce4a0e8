"""Run a script as the ranks of a torch.distributed job on this machine (gloo on CPU, or NCCL where asked)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from tests.support.net import free_port


def run_ranks(script: str, *args: str, world_size: int = 2, timeout: float = 180) -> list[dict[str, Any]]:
    """Start ``script`` (``python -c``) once per rank with the torchrun-style environment; each rank's last stdout
    line, parsed as JSON, in rank order. A rank that fails fails the test with its stderr."""
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "WORLD_SIZE": str(world_size)}
    env["OMP_NUM_THREADS"] = "1"
    procs = [
        subprocess.Popen(
            [sys.executable, "-W", "ignore", "-c", script, *args],
            env={**env, "RANK": str(rank), "LOCAL_RANK": str(rank)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in range(world_size)
    ]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=timeout)
        assert proc.returncode == 0, err[-3000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    return results
