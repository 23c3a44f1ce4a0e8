"""Small commands stay small: text-only rescoring never imports torch or pandas, and a bad override fails before any
heavy import (issue 15, item 8). Each check runs the CLI in a fresh interpreter and reads its ``sys.modules``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
HEAVY = ("torch", "pandas", "pyarrow", "transformers", "prefect")

# Runs main(argv) and prints, as the last stdout line, which heavy modules the process imported.
_PROBE = textwrap.dedent(
    """
    import json, sys
    from corewarding.cli import main
    code = main(sys.argv[1:])
    print(json.dumps(sorted(m for m in {heavy!r} if m in sys.modules)))
    sys.exit(code)
    """
).format(heavy=HEAVY)


def _probe(*args: str, cwd: Path) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )
    imported = json.loads(done.stdout.strip().splitlines()[-1])
    return done, imported


def _rows(method: str) -> list[dict[str, object]]:
    views = {"co_rewarding_1": ("original", "rephrased"), "co_rewarding_2": ("original", "teacher")}
    return [
        {"uid": f"q{q}", "view": view, "response": f"so \\boxed{{{k % 2}}}", "ground_truth": "1"}
        for q in range(2)
        for view in views.get(method, ("original",))
        for k in range(4)
    ]


@pytest.mark.parametrize("method", ["gt_grpo", "majority_voting", "co_rewarding_1", "co_rewarding_2"])
def test_rewards_score_imports_neither_torch_nor_pandas(tmp_path: Path, method: str) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in _rows(method)))
    out = tmp_path / "out.jsonl"
    done, imported = _probe("rewards", "score", "--method", method, "--input", str(src), "--output", str(out),
                            cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert imported == [], f"rewards score --method {method} imported {imported}"
    assert json.loads(done.stdout.splitlines()[0])["n"] == len(out.read_text().splitlines()) > 0


@pytest.mark.parametrize(
    ("args", "key"),
    [
        (["train", "methd=x"], "methd"),
        (["train", "schedule.totl_steps=3"], "schedule.totl_steps"),
        (["train", "grpo.n=0"], "grpo.n"),  # composes, then fails validation
        (["data", "prepare", "tiny", "datasource.locl_file=x"], "datasource.locl_file"),
        (["demo", "schedule.totl_steps=2"], "schedule.totl_steps"),
    ],
)
def test_bad_override_exits_2_naming_the_key_before_heavy_imports(tmp_path: Path, args: list[str], key: str) -> None:
    done, imported = _probe(*args, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and key in errors[0], done.stderr
    assert "torch" not in imported and "transformers" not in imported, imported
