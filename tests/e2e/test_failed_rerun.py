"""Failures are recorded, never covered (issue 32), as the reviewer found it: a cell finishes under one config, then
a rerun with a new config fails. The failed run prints its table and one `error:` line with no traceback; the cell's
row shows the failure and none of the old run's figures (they are on a line of their own, labelled as a previous
run's); the store holds the failed attempt under the new config's hash, and its reads mark the cell failed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from corewarding.pipeline.cells import plan_cell
from corewarding.results.ingest.attempts import failed_cells
from corewarding.results.report.build import build_report
from corewarding.results.report.collect import FAILED
from corewarding.results.store.store import reader
from corewarding.training.common import training_config_hash
from tests.support.repo import clone_project

BIN = Path(sys.executable).parent
CELL = "gt_grpo__tiny__tiny"
OLD, NEW = "schedule.total_steps=4", "schedule.total_steps=8"


def _run(clone: Path, override: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env |= {"HF_HUB_OFFLINE": "1", "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "PATH": f"{BIN}:{env['PATH']}"}
    command = [str(BIN / "corewarding"), "pipeline", "run", "--matrix", "demo", "--cell", CELL,
               "--steps", "data,train,evaluate,ingest", override]  # fmt: skip
    return subprocess.run(command, cwd=clone, env=env, capture_output=True, text=True, timeout=540)


def _row(table: str) -> list[str]:
    return next(line for line in table.splitlines() if line.startswith(CELL)).split()


@pytest.mark.slow
@pytest.mark.timeout(600)  # two pipeline runs of one tiny cell (about a minute here)
def test_a_rerun_failing_under_a_new_config_shows_and_records_the_failure_not_the_old_figures(tmp_path: Path) -> None:
    clone = clone_project(tmp_path)
    first = _run(clone, OLD)
    assert first.returncode == 0, first.stderr[-3000:]
    said = first.stdout + first.stderr  # no noise a user cannot act on: links to the private server that is gone,
    assert "View at http://127.0.0.1" not in said and "not valid and may be ignored" not in said  # a flag warning
    old_figures = _row(first.stdout)[5:8]  # mean reward, its unit, label acc of the finished 4-step run
    assert all(f != "-" for f in old_figures)

    (clone / "runs" / ".superseded").write_text("in the way")  # the old run cannot be moved aside: training fails
    second = _run(clone, NEW)

    assert second.returncode == 1
    assert "Traceback" not in second.stdout + second.stderr
    errors = [line for line in second.stderr.splitlines() if line.startswith("error:")]
    assert errors == [f"error: 1 of 1 cell(s) failed: {CELL} (train: FileExistsError: [Errno 17] File exists: "
                      "'runs/.superseded')"]  # fmt: skip
    row = _row(second.stdout)
    assert row[1:6] == ["failed", "not", "run", "not", "run"] and row[7:11] == ["-", "-", "-", "-"]
    earlier = next(line for line in second.stdout.splitlines() if "not this attempt's result" in line)
    assert "holds a previous run (config " in earlier and ", finished): mean reward " + old_figures[0] in earlier

    db = clone / "results" / "results.duckdb"
    new_hash = training_config_hash(plan_cell("demo", CELL, [NEW]).cfg)
    old_hash = training_config_hash(plan_cell("demo", CELL, [OLD]).cfg)
    with reader(db) as con:
        attempts = con.execute("SELECT config_hash, status, reason FROM cell_attempts ORDER BY recorded_at").fetchall()
        runs = con.execute("SELECT config_hash, status FROM runs WHERE cell_id = ?", [CELL]).fetchall()
        failed = failed_cells(con).to_dict("records")
    assert attempts == [
        (old_hash, "finished", None),
        (new_hash, "failed", "train: FileExistsError: [Errno 17] File exists: 'runs/.superseded'"),
    ]
    assert runs == [(old_hash, "finished")]  # the old run stays as it was, and is not the cell's result any more
    assert [(f["cell_id"], f["config_hash"], f["stored_run_from"]) for f in failed] == [
        (CELL, new_hash, "an earlier config")
    ]
    html = build_report(db, "demo")
    assert f"<td>{CELL}</td><td>0</td><td>{FAILED}</td>" in html and f"from an earlier config ({old_hash})" in html
