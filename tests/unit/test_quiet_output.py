"""Quiet small commands (issue 15, item 10): import-rephrased prints a summary, not its 4,000-line report, and each
warning is printed once per process."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from corewarding.cli import main
from corewarding.log_once import OnceFilter, install

QUESTIONS = [
    ("What is 2 + 3?", "A shop sells 2 apples and then 3 more; how many in all?", "5"),
    ("What is 4 times 6?", "<rewritten question>", "24"),  # the template placeholder the reference let through
    ("What is 10 - 7?", "Ten birds sit on a wire and 7 fly off; how many stay?", "3"),
    ("What is 9 / 3?", "What is 9 / 3?", "3"),  # unchanged
]


def _pairs(path: Path, copies: int) -> Path:
    def tag(text: str, i: int) -> str:  # distinct questions per copy, so none is a duplicate
        return text if text.startswith("<") else text.replace("?", f" (#{i})?")

    rows = [
        {"idx": i * len(QUESTIONS) + j, "original_question": tag(q, i), "rephrased_question": tag(r, i), "solution": a}
        for i in range(copies)
        for j, (q, r, a) in enumerate(QUESTIONS)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_import_rephrased_prints_a_summary_and_keeps_the_full_report_in_its_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pairs = _pairs(tmp_path / "pairs.jsonl", copies=50)  # 200 rows: the full report lists 50 placeholders, 50 unchanged
    assert main(["data", "import-rephrased", "math", "--pairs", str(pairs), f"paths.data_dir={tmp_path / 'data'}"]) == 0
    out, err = capsys.readouterr()
    assert len(out.splitlines()) < 30 and len(err.splitlines()) < 5
    brief = json.loads(out)
    assert (brief["rows_in"], brief["rows_out"]) == (200, 200)
    assert brief["rejected"] == {"placeholder": 50, "unchanged": 50} and brief["on_failure"] == "keep_original"
    full = json.loads(Path(brief["report"]).read_text())  # everything, per row, stays in the file
    assert Path(brief["report"]) == tmp_path / "data/math/release/train_rephrased.quality.json"
    assert len(full["rejected_rows"]) == 100 and full["rejected"] == brief["rejected"]
    assert {k: full[k] for k in ("rows_in", "rows_out", "dropped_total")} == {
        k: brief[k] for k in ("rows_in", "rows_out", "dropped_total")
    }
    assert "placeholder 50" in err


@pytest.fixture
def root_stream() -> Iterator[io.StringIO]:
    """A root handler writing to a string, removed afterwards with its filter."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield stream
    finally:
        root.removeHandler(handler)
        for other in root.handlers:  # pytest's own capture handlers got the filter too
            for f in [f for f in other.filters if isinstance(f, OnceFilter)]:
                other.removeFilter(f)


def test_each_warning_is_printed_once_per_process(root_stream: io.StringIO) -> None:
    assert install() >= 1
    hub = logging.getLogger("huggingface_hub.file_download")
    ours = logging.getLogger("corewarding.training.inputs")
    for attempt in range(3):
        hub.warning("Offline mode is enabled: cannot reach the Hub for %s", "Qwen/Qwen3-8B-Base")
        ours.warning("bfloat16 on CPU is slow; loading %s in float32", "m")
        ours.error("a different error each time: %d", attempt)
    hub.warning("Offline mode is enabled: cannot reach the Hub for %s", "another/repo")  # other text: shown
    lines = root_stream.getvalue().splitlines()
    assert lines.count("Offline mode is enabled: cannot reach the Hub for Qwen/Qwen3-8B-Base") == 1
    assert lines.count("bfloat16 on CPU is slow; loading m in float32") == 1
    assert "Offline mode is enabled: cannot reach the Hub for another/repo" in lines
    assert sum(line.startswith("a different error") for line in lines) == 3
    assert install() == 0  # installing twice adds no second filter to a handler
