"""``--json``: stdout carries the JSON document alone; the table and every other line of a command go to stderr.

So ``corewarding pipeline run --dry-run --json > plan.json`` writes valid JSON and the table still shows on the
terminal. The rule holds for every command with ``--json`` (docs/cli.md).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from collections.abc import Iterator
from typing import Any, TextIO


def _fileno(stream: TextIO) -> int | None:
    try:
        return stream.fileno()
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):  # not a file, e.g. pytest's capsys
        return None


@contextlib.contextmanager
def stdout_to_stderr(active: bool) -> Iterator[None]:
    """While active, whatever is written to stdout goes to stderr: this process's prints, a library's handler bound
    to the stdout file descriptor, the output of child processes; stdout is itself again on the way out, for the
    JSON document (``print_json``). Inactive, nothing changes."""
    if not active:
        yield
        return
    out, err = sys.stdout, sys.stderr
    out.flush()
    out_fd, err_fd = _fileno(out), _fileno(err)
    moved: tuple[int, int] | None = None  # stdout's descriptor and a copy of what it was
    if out_fd is not None and err_fd is not None:
        moved = (out_fd, os.dup(out_fd))
        os.dup2(err_fd, out_fd)
    try:
        with contextlib.redirect_stdout(err):
            yield
    finally:
        with contextlib.suppress(OSError, ValueError):
            out.flush()  # what was buffered inside belongs to stderr, where the descriptor still points
            err.flush()
        if moved is not None:
            os.dup2(moved[1], moved[0])
            os.close(moved[1])


def print_json(document: Any, indent: int | None = None) -> None:
    """The command's one JSON document, on stdout."""
    print(json.dumps(document, indent=indent))
