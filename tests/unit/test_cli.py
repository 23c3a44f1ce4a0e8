"""The command line: matrix listing and rescoring rollout dumps, including bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from corewarding.cli import main


def test_matrix_list_prints_66_cells_with_hub_ids(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["matrix", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 66
    assert "co_rewarding_2__qwen3-8b-base__dapo14k\tTMLR-Group-HF/Co-rewarding-II-Qwen3-8B-Base-DAPO14k" in lines


def test_matrix_list_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["matrix", "list", "--json", "--org", "lab"]) == 0
    entries = json.loads(capsys.readouterr().out)
    assert len(entries) == 66
    assert {"cell_id", "method", "base_model", "dataset", "hub_repo_id"} <= set(entries[0])
    assert entries[0]["hub_repo_id"] == "lab/GT-Qwen2.5-3B-MATH"


def write_jsonl(path: Path, rows: list[object]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def row(uid: str, view: str, answer: str, truth: str | None = "2") -> dict[str, object]:
    return {"uid": uid, "view": view, "response": f"so \\boxed{{{answer}}}", "ground_truth": truth}


def test_rewards_score_co_rewarding_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [row("a", "original", "2"), row("a", "rephrased", "2"), row("a", "original", "3"),
            row("a", "rephrased", "3"), row("a", "rephrased", "2"),
            row("b", "original", "9", None), row("b", "rephrased", "8", None)]  # fmt: skip
    src = write_jsonl(tmp_path / "in.jsonl", rows)
    out = tmp_path / "out.jsonl"
    assert main(["rewards", "score", "--method", "co_rewarding_1", "--input", str(src), "--output", str(out)]) == 0
    summary = json.loads(capsys.readouterr().out)
    scored = [json.loads(x) for x in out.read_text().splitlines()]
    # a: original vote "2" (first seen of a 1-1 tie), rephrased vote "2"; b: labels cross to 8 and 9
    assert [(r["view"], r["reward"], r["label"]) for r in scored] == [
        ("original", 1.0, "2"), ("rephrased", 1.0, "2"), ("original", 0.0, "2"), ("rephrased", 0.0, "2"),
        ("rephrased", 1.0, "2"), ("original", 0.0, "8"), ("rephrased", 0.0, "9"),
    ]  # fmt: skip
    assert summary["n"] == 7 and summary["mean_reward"] == pytest.approx(3 / 7)
    assert summary["nonempty_label_rate"] == 1.0
    assert summary["label_accuracy"] == 1.0  # groups of a carry ground truth 2 and label 2; b has none


def test_rewards_score_co_rewarding_3_writes_the_policy_rows_in_input_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [row("a", "teacher_original", "3"), row("a", "original", "2"), row("a", "rephrased", "3"),
            row("a", "teacher_rephrased", "2"), row("a", "original", "3"), row("a", "teacher_rephrased", "2"),
            row("a", "teacher_original", "3"), row("a", "rephrased", "2"),
            row(7, "original", "4", "4"), row(7, "rephrased", "4", "4"), row(7, "teacher_original", "4", "4"),
            row(7, "teacher_rephrased", "", "4")]  # fmt: skip
    for r in rows[:8]:
        r["uid"] = 6  # uids: integers throughout
    src = write_jsonl(tmp_path / "in.jsonl", rows)
    out = tmp_path / "out.jsonl"
    assert main(["rewards", "score", "--method", "co_rewarding_3", "--input", str(src), "--output", str(out)]) == 0
    summary = json.loads(capsys.readouterr().out)
    scored = [json.loads(x) for x in out.read_text().splitlines()]
    # uid 6: originals are labelled by the teacher's vote on the rephrasing (2), rephrasings by its vote on the
    # original (3); uid 7: the teacher voted nothing on the rephrasing, so the original earns nothing
    assert [(r["uid"], r["view"], r["reward"], r["label"]) for r in scored] == [
        (6, "original", 1.0, "2"), (6, "rephrased", 1.0, "3"), (6, "original", 0.0, "2"),
        (6, "rephrased", 0.0, "3"), (7, "original", 0.0, None), (7, "rephrased", 1.0, "4"),
    ]  # fmt: skip
    assert summary["n"] == 6 and summary["nonempty_label_rate"] == 0.75


def test_rewards_score_co_rewarding_3_refuses_a_uid_without_one_of_the_four_views(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    views = ("original", "rephrased", "teacher_original", "teacher_rephrased")
    rows = [row("a", v, "2") for v in views] + [row("b", v, "2") for v in views if v != "teacher_original"]
    src = write_jsonl(tmp_path / "in.jsonl", rows)
    out = tmp_path / "out.jsonl"
    assert main(["rewards", "score", "--method", "co_rewarding_3", "--input", str(src), "--output", str(out)]) == 2
    assert "in.jsonl:5: uid 'b' has no rollouts of view(s) teacher_original" in capsys.readouterr().err
    assert not out.exists()


def test_rewards_score_gt_and_missing_ground_truth(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", [row("a", "original", "2"), row("b", "original", "2", None)])
    out = tmp_path / "out.jsonl"
    assert main(["rewards", "score", "--method", "gt_grpo", "--input", str(src), "--output", str(out)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert [json.loads(x)["reward"] for x in out.read_text().splitlines()] == [1.0, 0.0]
    assert summary["missing_ground_truth"] == 1


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ([row("a", "original", "1"), "{not json"], "in.jsonl:2: not valid JSON"),
        (
            [row("a", "original", "1"), {"uid": "a", "view": "original", "response": "x"}],
            "in.jsonl:2: missing field",
        ),
        ([row("a", "teacher", "1")], "in.jsonl:1: view 'teacher' is not used"),
        ([row("a", "original", "1"), [1, 2]], "in.jsonl:2: expected a JSON object"),
    ],
)
def test_rewards_score_bad_input_names_the_line_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], lines: list[object], message: str
) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", lines)
    out = tmp_path / "out.jsonl"
    code = main(["rewards", "score", "--method", "majority_voting", "--input", str(src), "--output", str(out)])
    assert code != 0
    assert message in capsys.readouterr().err
    assert not out.exists() and list(tmp_path.iterdir()) == [src]


def test_rewards_score_refuses_logits_methods(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", [row("a", "original", "1")])
    code = main(["rewards", "score", "--method", "entropy", "--input", str(src), "--output", str(tmp_path / "o")])
    assert code == 2 and "rewards from logits" in capsys.readouterr().err


def test_rewards_score_keeps_unicode_line_separators_inside_strings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # U+2028 is legal raw inside a JSON string; str.splitlines() would cut the line there
    rows = [{"uid": "a", "view": "original", "response": "x\u2028y \\boxed{2}\u0085", "ground_truth": "2"}]
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps(rows[0], ensure_ascii=False) + "\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    assert main(["rewards", "score", "--method", "gt_grpo", "--input", str(src), "--output", str(out)]) == 0
    again = tmp_path / "again.jsonl"
    assert main(["rewards", "score", "--method", "gt_grpo", "--input", str(out), "--output", str(again)]) == 0
    scored = json.loads(again.read_text(encoding="utf-8").split("\n")[0])
    assert scored["reward"] == 1.0 and scored["response"] == rows[0]["response"]


def test_rewards_score_math_verify_counts_pathological_answers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a power tower that makes sympy explode: it must time out, count as "not equal", and be reported
    tower = "9^{9^{9^{9^{9}}}}"
    rows = [row("a", "original", "142.0"), row("a", "original", "142"), row("a", "original", "142"),
            row("b", "original", tower), row("b", "original", "1"), row("b", "original", "1")]  # fmt: skip
    src = write_jsonl(tmp_path / "in.jsonl", rows)
    out = tmp_path / "out.jsonl"
    args = [
        "rewards",
        "score",
        "--method",
        "majority_voting",
        "--canonicalize",
        "math_verify",
        "--math-verify-timeout",
        "1",
    ]
    assert main([*args, "--input", str(src), "--output", str(out)]) == 0
    summary = json.loads(capsys.readouterr().out)
    scored = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["reward"] for r in scored] == [1.0, 1.0, 1.0, 0.0, 1.0, 1.0]  # 142.0 joins 142; the tower is alone
    assert scored[3]["label"] == "1"
    assert summary["math_verify_timeouts"] >= 1 and summary["math_verify_errors"] == 0
