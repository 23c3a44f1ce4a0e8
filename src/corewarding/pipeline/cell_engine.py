"""A worker's cell-run process: Prefect's engine, then an exit without the interpreter's teardown.

With torch and transformers loaded, tearing every module down takes 2-3 s after the run has ended (measured here:
the engine's process outlived its flow run's final state by 3.4 s, time that each cell waits before the worker
takes the next one). Once the engine has returned, the exit hooks run as at a normal exit (threading's, where
Prefect drains its queued logs and events, then the ``atexit`` handlers), and the process ends with the engine's
exit code. Any exception other than SystemExit leaves the normal way (traceback and exit status).

    python -m corewarding.pipeline.cell_engine      # what the corewarding-cell deployments run (PREFECT__FLOW_RUN_ID)
"""

from __future__ import annotations

import atexit
import os
import runpy
import sys
import threading


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
    threading._shutdown()  # type: ignore[attr-defined]  # joins non-daemon threads, runs threading's exit hooks
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    run_then_exit("prefect.engine")
