"""metrics.jsonl is appended a whole line or not at all: a write that fails half-way (a full disk, here a file-size
limit in a child process) leaves the file exactly as it was and says which file and how much space it needed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from corewarding.training.local.trainer import append_line, metrics_line

CHILD = """
import resource, signal, sys
from pathlib import Path
from corewarding.training.errors import RunWriteError
from corewarding.training.local.trainer import append_line

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # past the limit, write() fails with EFBIG instead of killing us
limit = int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
try:
    append_line(Path(sys.argv[1]), '{"step": 2, "loss": 0.123456789}')
except RunWriteError as exc:
    print(exc)
    sys.exit(2)
"""


def test_a_line_appended_whole(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    append_line(path, json.dumps({"step": 1}))
    append_line(path, json.dumps({"step": 2}))
    assert [json.loads(x)["step"] for x in path.read_text().splitlines()] == [1, 2]


def test_a_write_cut_by_the_size_limit_leaves_the_file_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1, "loss": 0.5}\n')
    before = path.read_bytes()
    limit = len(before) + 10  # room for 10 of the new line's bytes: the kernel takes part of the line, then EFBIG
    done = subprocess.run([sys.executable, "-c", CHILD, str(path), str(limit)], capture_output=True, text=True)
    assert done.returncode == 2, done.stderr
    assert path.read_bytes() == before
    message = done.stdout.strip()
    assert message.startswith(f"cannot append to {path} (File too large): it needs 33 bytes"), message
    assert "run the same command to resume" in message and "\n" not in message


def test_a_non_finite_metric_is_written_null() -> None:
    line = metrics_line({"step": 3, "grad_norm": float("nan"), "loss": float("-inf"), "lr": 1e-6})
    assert json.loads(line) == {"step": 3, "grad_norm": None, "loss": None, "lr": 1e-6}
