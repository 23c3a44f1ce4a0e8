"""Hostile JSON lines for `rewards score` and `data prepare`: exit 2 naming file:line, no traceback, no bad output."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from corewarding.cli import main
from corewarding.rescore import write_jsonl_atomic

GOOD = {"uid": "a", "view": "original", "response": "so \\boxed{2}", "ground_truth": "2"}
DEEP = "[" * 100_000 + "]" * 100_000
BIG_INT = '{"uid": "a", "view": "original", "response": "x", "ground_truth": "2", "n": ' + "1" * 5000 + "}"
SURROGATE = '{"uid": "a", "view": "original", "response": "x \\ud800", "ground_truth": "2"}'

HOSTILE = [
    pytest.param(DEEP, "nested too deeply", id="deep-nesting"),
    pytest.param(BIG_INT, "an integer longer than 4300 digits", id="5000-digit-int"),
    pytest.param(SURROGATE, "key 'response': a lone surrogate", id="lone-surrogate"),
]


def _score(tmp_path: Path, lines: list[str], method: str = "majority_voting") -> tuple[int, Path]:
    src = tmp_path / "in.jsonl"
    src.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    out = tmp_path / "out.jsonl"
    return main(["rewards", "score", "--method", method, "--input", str(src), "--output", str(out)]), out


@pytest.mark.parametrize(("line", "message"), HOSTILE)
def test_rewards_score_hostile_json_is_exit_2_naming_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], line: str, message: str
) -> None:
    code, out = _score(tmp_path, [json.dumps(GOOD), line])
    err = capsys.readouterr().err
    assert code == 2
    assert f"error: {tmp_path / 'in.jsonl'}:2: " in err and message in err
    assert "Traceback" not in err and not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]


@pytest.mark.parametrize(("line", "message"), HOSTILE)
def test_data_prepare_hostile_json_is_exit_2_naming_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], line: str, message: str
) -> None:
    src = tmp_path / "src.jsonl"
    hostile = line.replace('"response"', '"question"').replace('"ground_truth": "2"', '"answer": "#### 2"')
    src.write_text('{"question": "one plus one?", "answer": "#### 2"}\n' + hostile + "\n", encoding="utf-8")
    overrides = [f"datasource.local_file={src}", f"paths.data_dir={tmp_path / 'data'}", "datasource.tokenizer=null"]
    code = main(["data", "prepare", "gsm8k", *overrides])
    err = capsys.readouterr().err
    assert code == 2
    assert f"error: {src}:2: " in err and message.replace("'response'", "'question'") in err
    assert "Traceback" not in err and not (tmp_path / "data").exists()


def test_data_prepare_json_list_with_a_lone_surrogate_names_the_item(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "src.json"
    src.write_text('[{"question": "q", "answer": "#### 2"}, {"question": "\\udc00", "answer": "#### 3"}]')
    overrides = [f"datasource.local_file={src}", f"paths.data_dir={tmp_path / 'data'}", "datasource.tokenizer=null"]
    assert main(["data", "prepare", "gsm8k", *overrides]) == 2
    assert f"error: {src}: key '[1].question': a lone surrogate" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_rewards_score_refuses_non_finite_numbers_naming_line_and_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    bad = json.dumps(GOOD)[:-1] + f', "meta": {{"logprob": {value}}}}}'
    code, out = _score(tmp_path, [json.dumps(GOOD), bad])
    err = capsys.readouterr().err
    assert code == 2
    assert f"{tmp_path / 'in.jsonl'}:2: key 'meta.logprob': " in err and "is not a finite number" in err
    assert not out.exists()


def test_scored_output_never_holds_nan(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    with pytest.raises(ValueError, match="Out of range float values are not JSON compliant"):
        write_jsonl_atomic(out, [{"reward": 1.0}, {"reward": math.nan}])
    assert list(tmp_path.iterdir()) == []


def test_rewards_score_refuses_integer_and_string_uids_in_one_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _score(tmp_path, [json.dumps(GOOD | {"uid": 1}), json.dumps(GOOD | {"uid": "1"})])
    err = capsys.readouterr().err
    assert code == 2 and not out.exists()
    assert f"{tmp_path / 'in.jsonl'}:2: uid '1' is a str but line 1 has a int uid" in err


def test_rewards_score_keeps_integer_uids_of_one_type(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [GOOD | {"uid": 1}, GOOD | {"uid": 1, "response": "\\boxed{3}"}, GOOD | {"uid": 2}]
    code, out = _score(tmp_path, [json.dumps(r) for r in rows])
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["groups"] == 2
    assert [json.loads(x)["uid"] for x in out.read_text().splitlines()] == [1, 1, 2]


@pytest.mark.parametrize("method", ["gt_grpo", "majority_voting"])
def test_all_blank_ground_truths_are_missing_and_not_accurate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], method: str
) -> None:
    rows = [GOOD | {"uid": "a", "ground_truth": ""}, GOOD | {"uid": "b", "ground_truth": " \n"}]
    code, out = _score(tmp_path, [json.dumps(r) for r in rows], method)
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["label_accuracy"] is None  # no group has a ground truth to be accurate against
    assert summary["missing_ground_truth"] == 2
    if method == "gt_grpo":  # nothing to compare against: no reward and no label
        assert [(r["reward"], r["label"]) for r in map(json.loads, out.read_text().splitlines())] == [(0.0, None)] * 2


def test_a_blank_truth_group_is_left_out_of_label_accuracy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [GOOD | {"uid": "a"}, GOOD | {"uid": "b", "response": "\\boxed{5}", "ground_truth": " "}]
    code, _ = _score(tmp_path, [json.dumps(r) for r in rows], "majority_voting")
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["label_accuracy"] == 1.0 and summary["missing_ground_truth"] == 1
