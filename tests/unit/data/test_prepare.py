"""`data prepare`: reference equality on MATH, ground-truth rules, quality reports, malformed sources."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from corewarding.cli import main
from corewarding.config import compose_config
from corewarding.data.prepare import prepare, report_path
from corewarding.files import SourceError
from corewarding.pipeline.cells import Selection, plan_cells
from corewarding.training.common import total_steps

UPSTREAM = "upstream/math"


def _cfg(tmp_path: Path, name: str, *overrides: str):
    return compose_config(
        [f"datasource={name}", f"paths.data_dir={tmp_path}/data", "datasource.tokenizer=null", *overrides], "data"
    )


def _lighteval_copy(reference: Path, out: Path) -> Path:
    """The reference questions in MATH-lighteval's raw form: problem, level, type, a solution ending in \\boxed{GT}."""
    ref = pd.read_parquet(reference)
    solutions = [f"Working... so the answer is $\\boxed{{{r['ground_truth']}}}$." for r in ref.reward_model]
    raw = pd.DataFrame(
        {"problem": [p[1]["content"] for p in ref.prompt], "level": ref.level, "type": ref.type, "solution": solutions}
    )
    raw.to_parquet(out)
    return out


@pytest.mark.parametrize(("name", "split"), [("math", "train"), ("math_test", "test")])
def test_math_output_equals_the_reference_row_for_row(shared_data: Path, tmp_path: Path, name: str, split: str) -> None:
    reference = shared_data / UPSTREAM / f"{split}.parquet"
    raw = _lighteval_copy(reference, tmp_path / "raw.parquet")
    report = prepare(_cfg(tmp_path, name, f"datasource.local_file={raw}", "validate.drop=[]"))
    out = Path(report.output)
    assert pq.read_table(out).to_pylist() == pq.read_table(reference).to_pylist()
    assert pq.read_schema(out).remove_metadata().equals(pq.read_schema(reference).remove_metadata())
    assert report.rows_in == report.rows_out == len(pd.read_parquet(reference))


def test_math_default_keeps_the_reference_rows_and_flags_the_two_blank_ground_truths(
    shared_data: Path, tmp_path: Path
) -> None:
    reference = shared_data / UPSTREAM / "train.parquet"
    report = prepare(
        _cfg(tmp_path, "math", f"datasource.local_file={_lighteval_copy(reference, tmp_path / 'r.parquet')}")
    )
    ref = pq.read_table(reference).to_pylist()
    blank = [r["extra_info"]["index"] for r in ref if not r["reward_model"]["ground_truth"]]
    assert len(blank) == 2
    # The paper default keeps them, as the reference's parquet does; they are reported as flagged.
    assert report.flagged["missing_ground_truth"] == 2 and report.rows_out == 7500
    assert sum(report.dropped.values()) == 0
    assert [r["index"] for r in report.flagged_rows] == blank
    assert pq.read_table(report.output).to_pylist() == ref
    saved = json.loads(report_path(Path(report.output)).read_text())
    assert saved["flagged"]["missing_ground_truth"] == 2 and saved["dropped_total"] == 0
    assert sum(saved["counts"]["level"].values()) == 7500 and "Algebra" in saved["counts"]["type"]
    local = f"datasource.local_file={tmp_path / 'r.parquet'}"
    dropped = prepare(_cfg(tmp_path, "math", local, "validate.drop=[missing_ground_truth]"))
    assert dropped.dropped["missing_ground_truth"] == 2 and dropped.rows_out == 7498
    assert [r["index"] for r in dropped.dropped_rows] == blank


BENCHMARKS = {
    "math500": ("math500/test.jsonl", 500, "\\left( 3, \\frac{\\pi}{2} \\right)"),
    "gsm8k": ("gsm8k/test.jsonl", 1319, "18"),
    "amc": ("amc/test.json", 83, "142.0"),
    "aime24": ("aime24/test.jsonl", 30, "204"),
    "aime25": ("aime25/test.json", 30, "070"),
    "minerva_math": ("minerva_math/test.jsonl", 272, "1.6"),
    "olympiadbench": ("olympiadbench/test.jsonl", 675, "2"),
}


@pytest.mark.parametrize("name", sorted(BENCHMARKS))
def test_every_evaluation_set_prepares_from_its_local_copy(shared_data: Path, tmp_path: Path, name: str) -> None:
    file, rows, first_answer = BENCHMARKS[name]
    report = prepare(_cfg(tmp_path, name, f"datasource.local_file={shared_data / 'benchmarks' / file}"))
    out = pq.read_table(report.output).to_pylist()
    # Evaluation sets keep every problem with a question and an answer (validate.drop_eval).
    assert report.rows_in == report.rows_out == rows
    assert out[0]["prompt"][0]["role"] == "system" and out[0]["extra_info"]["split"] == "test"
    if first_answer is not None:
        assert out[0]["reward_model"]["ground_truth"] == first_answer


def test_math500_boxed_rule_agrees_with_its_answer_field(shared_data: Path, tmp_path: Path) -> None:
    local = shared_data / "benchmarks/math500/test.jsonl"
    boxed = prepare(
        _cfg(
            tmp_path,
            "math500",
            f"datasource.local_file={local}",
            "datasource.answer=[{column: solution, rule: last_boxed}]",
        )
    )
    answers = [json.loads(line)["answer"] for line in local.read_text().splitlines()]
    got = [r["reward_model"]["ground_truth"] for r in pq.read_table(boxed.output).to_pylist()]
    assert got == answers


def _paper_steps(cell_id: str, rows: int) -> int:
    """The planned number of training steps of a paper cell on ``rows`` rows (the trainers' own function)."""
    plan = plan_cells(Selection(matrix="paper", cells=(cell_id,)))[0]
    return total_steps(plan.cfg, rows)


def test_openrs_paper_setting_keeps_the_reference_rows_and_reports_duplicates(
    shared_data: Path, tmp_path: Path
) -> None:
    """The reference trains on all 7,000 rows (duplicates and the None ground truth included): 54 steps x 3 epochs."""
    local = shared_data / "upstream/open-rs/train.parquet"
    level = "datasource.extra_info={level: extra_info.level}"
    report = prepare(_cfg(tmp_path, "openrs", f"datasource.local_file={local}", level))
    ref = pq.read_table(local).to_pylist()
    pairs = [(r["prompt"][1]["content"], r["reward_model"]["ground_truth"]) for r in ref]
    out = pq.read_table(report.output).to_pylist()
    assert report.rows_in == report.rows_out == len(out) == 7000 and sum(report.dropped.values()) == 0
    assert [(r["prompt"][1]["content"], r["reward_model"]["ground_truth"]) for r in out] == pairs
    assert [r["extra_info"]["index"] for r in out] == [r["extra_info"]["index"] for r in ref]
    # Reported, not dropped: the reference keeps the row whose ground truth is None (its GT reward is then always
    # 0; ours counts it as missing_ground_truth) and every repeated question/answer row.
    with_answer = [p for p in pairs if p[1] is not None and p[1].strip()]
    assert report.flagged["missing_ground_truth"] == len(pairs) - len(with_answer) == 1
    assert [r["index"] for r in report.flagged_rows if r["reason"] == "missing_ground_truth"] == [4303]
    assert out[4303]["reward_model"]["ground_truth"] is None
    assert report.flagged["duplicate"] == len(with_answer) - len(set(with_answer)) == 134
    saved = json.loads(report_path(Path(report.output)).read_text())
    assert saved["flagged"]["duplicate"] == 134 and saved["dropped_total"] == 0
    assert set(report.counts["level"]) == {"Easy", "Hard"}
    for cell in ("gt_grpo__qwen3-8b-base__openrs", "co_rewarding_2__qwen3-4b-base__openrs"):
        assert _paper_steps(cell, report.rows_out) == 162  # methods.md: OpenRS 54/epoch (162)
    # The switch: deduplicating (the old default) leaves 6,865 rows, 53 steps per epoch.
    dedup = prepare(
        _cfg(
            tmp_path, "openrs", f"datasource.local_file={local}", level,
            "validate.drop=[empty_question,missing_ground_truth,duplicate]",
        )
    )  # fmt: skip
    assert dedup.rows_out == 6865 and dedup.dropped["duplicate"] == 134
    assert _paper_steps("gt_grpo__qwen3-8b-base__openrs", dedup.rows_out) == 159


def test_gsm8k_answer_after_the_hashes(tmp_path: Path) -> None:
    src = tmp_path / "gsm.jsonl"
    src.write_text(json.dumps({"question": "How many?", "answer": "3 * 4 = 12\n#### 1,012"}) + "\n")
    report = prepare(_cfg(tmp_path, "gsm8k", f"datasource.local_file={src}"))
    assert pq.read_table(report.output).to_pylist()[0]["reward_model"]["ground_truth"] == "1012"


def test_prompt_length_check_uses_the_tokenizer_and_lists_each_drop(tmp_path: Path, artifacts_dir: Path) -> None:
    cfg = compose_config(
        [
            "datasource=tiny",
            f"paths.data_dir={tmp_path}",
            f"paths.artifacts_dir={artifacts_dir}",
            "validate.max_prompt_tokens=38",
            "validate.drop=[empty_question,prompt_too_long]",
        ],
        "data",
    )
    report = prepare(cfg)
    assert report.prompt_tokens["checked"] and report.prompt_tokens["max"] > 38
    assert report.dropped["prompt_too_long"] > 0
    assert report.rows_out + report.dropped["prompt_too_long"] == 64
    assert all("prompt tokens > 38" in r["detail"] for r in report.dropped_rows)


def test_a_reason_left_out_of_drop_is_flagged_not_dropped(tmp_path: Path) -> None:
    src = tmp_path / "s.jsonl"
    src.write_text("".join(json.dumps({"question": q, "answer": "x\n#### 1"}) + "\n" for q in ["A?", "A?", " "]))
    report = prepare(_cfg(tmp_path, "gsm8k", f"datasource.local_file={src}", "validate.drop=[empty_question]"))
    assert report.dropped["empty_question"] == 1 and report.flagged["duplicate"] == 1 and report.rows_out == 2


# --- malformed sources: a clear error naming the file, and no output at all -------------------------------------


def _fails(tmp_path: Path, src: Path, match: str) -> None:
    cfg = _cfg(tmp_path, "gsm8k", f"datasource.local_file={src}")
    with pytest.raises(SourceError, match=match):
        prepare(cfg)
    assert not Path(cfg.datasource.output).exists()
    assert not report_path(Path(cfg.datasource.output)).exists()


def test_bad_json_line_names_file_and_line(tmp_path: Path) -> None:
    src = tmp_path / "bad.jsonl"
    src.write_text('{"question": "a", "answer": "#### 1"}\n{"question": "b", "answer": \n')
    _fails(tmp_path, src, f"{src}:2: not valid JSON")


def test_missing_column_names_it(tmp_path: Path) -> None:
    src = tmp_path / "nocol.jsonl"
    src.write_text('{"question": "a", "solution": "#### 1"}\n')
    _fails(tmp_path, src, r"nocol.jsonl: missing answer column \(one of answer\)")


def test_wrong_type_names_row_and_column(tmp_path: Path) -> None:
    src = tmp_path / "types.jsonl"
    src.write_text('{"question": "a", "answer": "#### 1"}\n{"question": 7, "answer": "#### 2"}\n')
    _fails(tmp_path, src, r"types.jsonl: row 1, column question: expected text, got int")


def test_truncated_parquet_names_the_file(tmp_path: Path) -> None:
    good = tmp_path / "good.parquet"
    pd.DataFrame({"question": ["a"] * 100, "answer": ["#### 1"] * 100}).to_parquet(good)
    cut = tmp_path / "cut.parquet"
    cut.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    _fails(tmp_path, cut, "cut.parquet: unreadable or truncated parquet")


def test_a_failed_prepare_leaves_the_previous_output_untouched(tmp_path: Path) -> None:
    good = tmp_path / "good.jsonl"
    good.write_text('{"question": "a", "answer": "#### 1"}\n')
    report = prepare(_cfg(tmp_path, "gsm8k", f"datasource.local_file={good}"))
    before = Path(report.output).read_bytes()
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "a", "answer": "#### 1"}\nnot json\n')
    with pytest.raises(SourceError):
        prepare(_cfg(tmp_path, "gsm8k", f"datasource.local_file={bad}"))
    assert Path(report.output).read_bytes() == before
    assert [p.name for p in Path(report.output).parent.iterdir() if p.name.startswith(".")] == []


def test_cli_reports_a_bad_source_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "bad.jsonl"
    src.write_text("[1, 2]\n")
    code = main(
        [
            "data",
            "prepare",
            "gsm8k",
            f"datasource.local_file={src}",
            f"paths.data_dir={tmp_path}",
            "datasource.tokenizer=null",
        ]
    )
    assert code == 2
    assert f"error: {src}:1: expected a JSON object, got list" in capsys.readouterr().err


def test_hub_path_loads_through_datasets(tmp_path: Path) -> None:
    """The Hub branch (datasets.load_dataset) on a local dataset folder: the same call a Hub id takes, offline."""
    folder = tmp_path / "hub_copy" / "data"
    folder.mkdir(parents=True)
    pd.DataFrame({"question": ["Q1?", "Q2?"], "answer": ["a\n#### 3", "b\n#### 4"]}).to_parquet(folder / "test.parquet")
    report = prepare(_cfg(tmp_path, "gsm8k", f"datasource.hub_id={folder.parent}", "datasource.hub_config=null"))
    assert report.source == f"hf://{folder.parent}:test"
    assert [r["reward_model"]["ground_truth"] for r in pq.read_table(report.output).to_pylist()] == ["3", "4"]


def test_unreachable_hub_dataset_is_a_clear_error(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path, "gsm8k", "datasource.hub_id=no-such-org/no-such-set")
    with pytest.raises(SourceError, match=r"hub dataset no-such-org/no-such-set .* set datasource.local_file"):
        prepare(cfg)
    assert not Path(cfg.datasource.output).exists()


def test_integer_answers_stay_integers_next_to_a_null(tmp_path: Path) -> None:
    """A null in an integer column must not turn "204" into "204.0" (pandas would make the column float)."""
    src = tmp_path / "aime.jsonl"
    lines = [json.dumps({"id": i, "problem": f"P{i}", "answer": a}) for i, a in enumerate([204, None, 7])]
    src.write_text("\n".join(lines) + "\n")
    report = prepare(_cfg(tmp_path, "aime24", f"datasource.local_file={src}"))
    got = [r["reward_model"]["ground_truth"] for r in pq.read_table(report.output).to_pylist()]
    assert got == ["204", "7"] and report.dropped["missing_ground_truth"] == 1
    table = tmp_path / "aime.parquet"
    answers = pa.array([204, None, 7], pa.int64())
    pq.write_table(pa.table({"id": [0, 1, 2], "problem": ["P0", "P1", "P2"], "answer": answers}), table)
    report = prepare(_cfg(tmp_path, "aime24", f"datasource.local_file={table}"))
    assert [r["reward_model"]["ground_truth"] for r in pq.read_table(report.output).to_pylist()] == ["204", "7"]


def test_empty_source_is_named(tmp_path: Path) -> None:
    src = tmp_path / "empty.jsonl"
    src.write_text("\n")
    _fails(tmp_path, src, "empty.jsonl: no records")
