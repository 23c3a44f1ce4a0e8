"""The cell-run process ends fast but as a normal exit would: exit hooks run, threads finish, the code is kept."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

RUNNER = "from corewarding.runtime.cell_engine import run_then_exit; run_then_exit('probe')"


def _run_probe(tmp_path: Path, ending: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "probe.py").write_text(
        textwrap.dedent(
            f"""
            import atexit, pathlib, sys, threading, time
            out = pathlib.Path({str(tmp_path)!r})
            atexit.register(lambda: (out / "atexit").write_text("ran"))
            def late() -> None:
                time.sleep(0.3)
                (out / "thread").write_text("finished")
            threading.Thread(target=late).start()  # not a daemon: a normal exit waits for it
            print("main ran", flush=True)
            {ending}
            """
        )
    )
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.run([sys.executable, "-c", RUNNER], env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(("ending", "code"), [("pass", 0), ("sys.exit(3)", 3), ("sys.exit('bad flow run id')", 1)])
def test_the_exit_keeps_the_code_and_runs_the_hooks(tmp_path: Path, ending: str, code: int) -> None:
    done = _run_probe(tmp_path, ending)
    assert done.returncode == code, done.stderr
    assert done.stdout == "main ran\n"
    assert (tmp_path / "atexit").read_text() == "ran"
    assert (tmp_path / "thread").read_text() == "finished"
    if code == 1:
        assert done.stderr.strip() == "bad flow run id"


def test_an_exception_leaves_the_normal_way(tmp_path: Path) -> None:
    done = _run_probe(tmp_path, "raise ValueError('broken flow file')")
    assert done.returncode == 1
    assert "ValueError: broken flow file" in done.stderr
    assert (tmp_path / "atexit").read_text() == "ran"


def test_prefects_engine_runs_under_it(tmp_path: Path) -> None:
    env = {**os.environ, "PREFECT__FLOW_RUN_ID": "not-a-uuid", "PREFECT_HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "corewarding.runtime.cell_engine"], env=env, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 1
    assert "Invalid flow run id" in done.stdout + done.stderr
