"""One evaluation contract: the column tables that both the writer and the store's reader use, one metric-row function
for math and external units, and the unit keys of ``provenance.UnitSettings`` (equal to the keys stored before it)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from corewarding.eval_rows import METRIC_TABLE, SAMPLE_TABLE, arrow_schema, stored
from corewarding.evaluation.benchmarks import Problem
from corewarding.evaluation.eval_config import benchmark_configs
from corewarding.evaluation.harness import evaluate_targets
from corewarding.evaluation.outputs import math_metric_rows, tool_metric_rows
from corewarding.evaluation.provenance import UnitSettings
from corewarding.evaluation.targets import Target
from corewarding.evaluation.units import METRIC_SCHEMA
from corewarding.files import write_parquet_atomic
from corewarding.lm.generation import Completion, SamplingSettings
from corewarding.results.ingest.evaluation import insert_eval_metrics, insert_eval_samples
from corewarding.results.store import store
from corewarding.rows import make_row
from corewarding.settings_diff import settings_json, settings_key

REPLIES = {"1+1": ["\\boxed{2}", "\\boxed{3}"], "2+5": ["\\boxed{7}", "the answer is seven and"]}


class TwoReplies:
    """Two scripted replies per question; the unfinished one stops at the length limit."""

    def generate(
        self, conversations: Sequence[list[dict[str, str]]], sampling: SamplingSettings, seed: int
    ) -> list[list[Completion]]:
        out = []
        for messages in conversations:
            texts = REPLIES[messages[-1]["content"]][: sampling.n]
            out.append(
                [Completion(t, 3 + i, "stop" if t.startswith("\\boxed") else "length") for i, t in enumerate(texts)]
            )
        return out

    def close(self) -> None:
        pass


def test_a_unit_written_and_ingested_keeps_every_column(tmp_path: Path) -> None:
    data = tmp_path / "set.parquet"
    write_parquet_atomic([make_row(q, g, i, "test") for i, (q, g) in enumerate([("1+1", "2"), ("2+5", "7")])], data)
    overrides = [f"benchmark.data_file={data}", "benchmark.n=2", "benchmark.metrics=[pass@1]", "bootstrap.samples=20"]
    out = tmp_path / "run"
    [outcome] = evaluate_targets([Target(4, "scripted", "scripted@1")], benchmark_configs(["math500"], overrides), out,
                                 lambda cfg, path: TwoReplies())  # fmt: skip
    assert outcome.status == "evaluated"
    samples_file, metrics_file = out / "eval" / "samples.parquet", out / "eval" / "metrics.parquet"
    assert pq.read_schema(samples_file).equals(arrow_schema(SAMPLE_TABLE))  # the writer writes the table's columns
    assert pq.read_schema(metrics_file).equals(arrow_schema(METRIC_TABLE))
    written, metric_rows = pq.read_table(samples_file).to_pylist(), pq.read_table(metrics_file).to_pylist()
    assert [s["finish_reason"] for s in written] == ["stop", "stop", "stop", "length"]
    assert [s["truncated"] for s in written] == [False, False, False, True]

    db = tmp_path / "store.duckdb"
    with store.writer(db) as con:
        assert insert_eval_metrics(con, "run-a", metrics_file) == 2  # pass@1 under strict and math_verify
        assert insert_eval_samples(con, "run-a", samples_file) == 4
    tables = [("eval_samples", SAMPLE_TABLE, written), ("eval_metrics", METRIC_TABLE, metric_rows)]
    with store.reader(db) as con:
        for table, columns, rows in tables:
            names = [c.name for c in stored(columns)]
            got = con.execute(f"SELECT {', '.join(names)} FROM {table} ORDER BY ALL").fetchall()
            want = sorted(tuple({**r, "benchmark": "MATH500"}[n] for n in names) for r in rows)  # the canonical name
            assert [tuple(r) for r in got] == want, table  # every stored column comes back as written
        kept = con.execute("SELECT finish_reason FROM eval_samples ORDER BY problem_id, sample_index").fetchall()
    assert kept == [("stop",), ("stop",), ("stop",), ("length",)]  # read back, not dropped
    assert [c.name for c in METRIC_TABLE if not c.stored] == ["model"]  # a local path: written, not stored
    assert all(c.stored for c in SAMPLE_TABLE)


def _math_unit(tmp_path: Path) -> tuple[UnitSettings, Path, list[Problem]]:
    data = tmp_path / "data.parquet"
    data.write_bytes(b"not really parquet, only hashed")
    [cfg] = benchmark_configs(["math500"], [])
    problems = [Problem("p0", [{"role": "system", "content": "think"}, {"role": "user", "content": "1+1"}], "2")]
    return UnitSettings.from_config(cfg), data, problems


def test_an_external_row_has_the_shape_of_a_math_row(tmp_path: Path) -> None:
    target = Target(3, str(tmp_path), "sha256:0123456789abcdef")
    unit, data, problems = _math_unit(tmp_path)
    keys = unit.keys(target, data, problems)
    grouped = [[{"correct_strict": True, "correct_math_verify": True, "extracted_answer": "2"}]]
    math_rows = math_metric_rows(unit, target, keys, grouped)
    [ifeval] = benchmark_configs(["ifeval"], [])
    external = UnitSettings.from_config(ifeval)
    tool_keys = external.keys(target).with_tool("lm_eval", "0.4.9")
    tool_rows = tool_metric_rows(
        external, target, tool_keys, "lm_eval", {"score": 0.5, "other": 0.25}, {"score": 0.1}, 541
    )

    names = [c.name for c in METRIC_TABLE]
    assert [list(r) for r in math_rows] == [names, names] and [list(r) for r in tool_rows] == [names, names]
    pa.Table.from_pylist(math_rows + tool_rows, schema=METRIC_SCHEMA)  # one schema takes both
    score, other = tool_rows
    assert (score["value"], score["ci_low"], score["ci_high"]) == (0.5, pytest.approx(0.304), pytest.approx(0.696))
    assert (other["ci_low"], other["ci_high"]) == (None, None)  # no standard error, no interval
    assert (score["checker"], score["n"], score["num_problems"], score["benchmark"]) == ("lm_eval", 1, 541, "ifeval")
    assert json.loads(score["settings"])["checker_version"].startswith("0.4.9+code-")
    assert (math_rows[0]["checker"], math_rows[0]["n"], math_rows[0]["num_problems"]) == ("strict", 1, 1)


def test_unit_keys_are_the_keys_stored_before(tmp_path: Path) -> None:
    """The keys of a fixed config, as the code before UnitSettings computed them: outputs on disk stay unchanged."""
    target = Target(3, str(tmp_path), "sha256:0123456789abcdef")
    unit, data, problems = _math_unit(tmp_path)
    keys = unit.keys(target, data, problems)
    assert (keys.generation, keys.scoring) == ("ea97b12a82633a98", "359c6aa090c4015a")
    # by hand: the scoring key is the first 16 hex of the SHA-256 of the sorted JSON of how generations are scored
    by_hand = {"checkers": ["strict", "math_verify"], "math_verify_timeout_s": 5.0, "metrics": ["pass@1"],
               "bootstrap": {"samples": 1000, "confidence": 0.95}, "seed": 0}  # fmt: skip
    assert keys.scoring == hashlib.sha256(json.dumps(by_hand, sort_keys=True).encode()).hexdigest()[:16]
    assert keys.material["sampling"] == {"n": 1, "temperature": 0.8, "top_p": 1.0, "max_new_tokens": 3072}
    assert keys.settings["prompt"] == "think" and keys.settings["benchmark_sha256"] == keys.material["data_sha256"]
    assert set(keys.checkers) == {"strict", "math_verify"}
    strict = keys.checkers["strict"]  # each checker's row columns: its settings and their key, computed once
    assert keys.columns["strict"] == {"settings": settings_json(strict), "settings_key": settings_key(strict)}
    assert keys.columns["strict"]["settings_key"] != keys.columns["math_verify"]["settings_key"]

    [greedy] = benchmark_configs(["math500"], ["benchmark.temperature=0", "benchmark.n=4"])
    assert UnitSettings.from_config(greedy).sampling.n == 1  # greedy: one sample whatever n says

    [ifeval] = benchmark_configs(["ifeval"], [])
    external = UnitSettings.from_config(ifeval).keys(target)  # no data file: an external unit's keys
    assert external.generation == external.scoring == "be9dd7564a2de079"
    assert external.settings["benchmark_sha256"] is None and external.checkers == external.columns == {}
