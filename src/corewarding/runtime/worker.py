"""Where a work pool's worker runs a cell: its own checkout of the project (each GPU machine has one).

The ``corewarding-cell`` deployments carry :func:`enter_checkout` as their pull step instead of the deploying
machine's path, so the same deployment runs from whichever checkout the worker was started in.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from corewarding import CHECKOUT

log = logging.getLogger(__name__)

ROOT_VARIABLE = "COREWARDING_ROOT"
PULL_STEP = "corewarding.runtime.worker.enter_checkout"
# A cell run's process: Prefect's engine straight away, ending without the interpreter's teardown (see
# corewarding.runtime.cell_engine). Without a command, Prefect's process worker starts a workspace supervisor that
# runs the pull steps and then execs the engine: two interpreter and Prefect start-ups per cell (about 2.5 s each
# here) instead of one; the engine runs the pull step itself. `python` is the worker's: the project's environment
# is active where a worker starts (the GPU image has it first on PATH).
CELL_ENGINE_COMMAND = "python -m corewarding.runtime.cell_engine"
PIPELINE_ENGINE_COMMAND = f"{CELL_ENGINE_COMMAND} pipeline"  # the scheduled pipeline runs' process, the same way
# The platform's flows, by the name the engine command gives: the only code a worker runs, whatever a deployment on
# the server says (its entrypoint and pull steps are not read: docs/work-pool.md)
ENTRYPOINTS = {"cell": "flows/cell.py:cell", "pipeline": "flows/pipeline.py:pipeline"}
ENGINE_COMMANDS = {CELL_ENGINE_COMMAND: "cell", PIPELINE_ENGINE_COMMAND: "pipeline"}


def checkout_root() -> Path:
    """``$COREWARDING_ROOT``, else the checkout this package is installed from (``pip install -e .``)."""
    configured = os.environ.get(ROOT_VARIABLE)
    root = Path(configured) if configured else CHECKOUT
    if not (root / "flows" / "cell.py").is_file():
        raise FileNotFoundError(f"{root}: not a corewarding checkout (no flows/cell.py); set {ROOT_VARIABLE}")
    return root


def enter_checkout() -> dict[str, str]:
    """Prefect pull step: work in this machine's checkout; returns it as the step's output."""
    root = checkout_root()
    os.chdir(root)
    log.info("cell run in checkout %s", root)
    return {"directory": str(root)}
