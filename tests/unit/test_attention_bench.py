"""perf/attention_bench.py's --tiny mode on CPU (fp32), run as the script it is: every variant of the log-prob pass
times a micro-batch; verl's packed row (position ids restarting per sequence, no mask) under sdpa and the padded batch
give one-sequence-at-a-time's log-probs to float rounding; the rows that cannot run on CPU say why; and packed
flex_attention stops compiling after its first micro-batches though the packed length changes every time."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("attention_bench") / "tiny.json"
    command = [sys.executable, "perf/attention_bench.py", "--tiny", "--device", "cpu", "--out", str(out)]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "| tiny log-prob |" in done.stdout, done.stdout  # the markdown table
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def _row(result: dict[str, Any], variant: str, pass_name: str) -> dict[str, Any]:
    (row,) = [r for r in result["rows"] if (r["variant"], r["pass_name"]) == (variant, pass_name)]
    return row


@pytest.mark.slow
def test_every_cpu_variant_times_the_log_prob_pass(tiny_run: dict[str, Any]) -> None:
    for variant in ("packed sdpa", "packed flex_attention", "padded sdpa", "one at a time"):
        row = _row(tiny_run, variant, "log-prob")
        assert row["skipped"] is None, row
        assert row["shape"] == "tiny" and row["seconds"] > 0 and row["tokens"] > 0, row
        assert len(row["runs_s"]) == 2, row


@pytest.mark.slow
def test_packed_and_padded_sdpa_match_one_sequence_at_a_time(tiny_run: dict[str, Any]) -> None:
    for pass_name in ("log-prob", "training"):
        for variant in ("packed sdpa", "padded sdpa"):
            row = _row(tiny_run, variant, pass_name)
            assert row["max_abs_logprob_diff"] is not None and row["max_abs_logprob_diff"] < 1e-4, row
    assert _row(tiny_run, "packed flex_attention", "log-prob")["max_abs_logprob_diff"] < 1e-4


@pytest.mark.slow
def test_rows_that_cannot_run_on_cpu_say_why(tiny_run: dict[str, Any]) -> None:
    flex_training = _row(tiny_run, "packed flex_attention", "training")
    assert flex_training["seconds"] is None and "no backward on CPU" in flex_training["skipped"]
    if importlib.util.find_spec("flash_attn") is None:
        for pass_name in ("log-prob", "training"):
            assert _row(tiny_run, "packed flash_attention_2", pass_name)["skipped"].startswith("not installed")
    assert tiny_run["card"] == "cpu" and tiny_run["dtype"] == "fp32"


@pytest.mark.slow
def test_flex_attention_stops_compiling_over_varying_packed_lengths(tiny_run: dict[str, Any]) -> None:
    (check,) = tiny_run["recompile_check"]
    assert check["micro_batches"] >= 20 and len(set(check["packed_lengths"])) > 10, check
    assert check["graphs_per_micro_batch"][0] > 0, check  # the first micro-batch compiles (counting works)
    assert check["passed"] and all(g == 0 for g in check["graphs_per_micro_batch"][3:]), check
    assert check["first_micro_batch_s"] > check["steady_median_s"] > 0, check
