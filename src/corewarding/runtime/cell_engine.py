"""A worker's flow-run process: the platform's own flow from this machine's checkout, run by Prefect's engine, then
an exit without the interpreter's teardown.

The flow is the one the command names (``cell``, the default, or ``pipeline``: ``worker.ENTRYPOINTS``), loaded from
the checkout the worker runs in; the deployment's entrypoint and pull steps on the server are not read, so whoever
can change a deployment through the Prefect API cannot make a worker import or run anything else.

With torch and transformers loaded, tearing every module down takes 2-3 s after the run has ended (measured here:
the engine's process outlived its flow run's final state by 3.4 s, time that each cell waits before the worker
takes the next one). Once the engine has returned, the exit hooks run as at a normal exit (threading's, where
Prefect drains its queued logs and events, then the ``atexit`` handlers), and the process ends with the engine's
exit code. Any exception other than SystemExit leaves the normal way (traceback and exit status).

    python -m corewarding.runtime.cell_engine      # what the corewarding-cell deployments run (PREFECT__FLOW_RUN_ID)
    python -m corewarding.runtime.cell_engine pipeline     # the scheduled pipeline deployments
"""

from __future__ import annotations

import atexit
import os
import runpy
import sys
import threading
from pathlib import Path

from corewarding.runtime.worker import ENTRYPOINTS, enter_checkout


def exit_code(value: object) -> int:
    """The status ``sys.exit(value)`` gives: None is 0, an int itself, anything else is printed and gives 1."""
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    print(value, file=sys.stderr)
    return 1


def run_then_exit(module: str) -> None:
    """Run ``module`` as ``__main__``; then the exit hooks, and ``os._exit`` with its code."""
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as stop:
        code = exit_code(stop.code)
    threading._shutdown()  # type: ignore[attr-defined]  # private, not in typeshed: joins non-daemon threads, runs exit hooks
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def select_flow(argv: list[str]) -> str:
    """Enter the checkout and point Prefect's engine at the flow that ``argv`` names (``PREFECT__FLOW_ENTRYPOINT``:
    the engine then loads that file instead of the deployment's source); returns the entrypoint."""
    kind = argv[0] if argv else "cell"
    if kind not in ENTRYPOINTS or len(argv) > 1:
        raise SystemExit(f"cell_engine: expected no argument or one of {', '.join(ENTRYPOINTS)}, got {argv}")
    root = Path(enter_checkout()["directory"])
    path, name = ENTRYPOINTS[kind].split(":")
    entrypoint = f"{root / path}:{name}"
    os.environ["PREFECT__FLOW_ENTRYPOINT"] = entrypoint
    del sys.argv[1:]  # the engine reads a flow run id from its first argument; ours comes from PREFECT__FLOW_RUN_ID
    return entrypoint


if __name__ == "__main__":
    select_flow(sys.argv[1:])
    run_then_exit("prefect.engine")
