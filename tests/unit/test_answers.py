"""Reference-compatible extraction and strict normalisation (corewarding.grading.answers)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from corewarding.grading.answers import (
    extract_boxed_answer,
    extract_gsm8k_answer,
    is_equiv_strict,
    last_boxed_only_string,
    remove_boxed,
    strict_score,
    strip_string,
)

SHARED_DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"


def _benchmark(relative: str) -> Path:
    path = SHARED_DATA / "benchmarks" / relative
    if not path.is_file():
        pytest.skip(f"shared benchmark file {path} is absent")
    return path


def _read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# ---- extraction ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (r"so $\boxed{\frac{1}{\sqrt{2}}}$.", r"\boxed{\frac{1}{\sqrt{2}}}"),
        (r"\boxed{a} and finally \boxed{b}", r"\boxed{b}"),
        (r"$\boxed 7$ and more", r"\boxed 7"),
        (r"the \boxed 3 end", r"\boxed 3 end"),
        (r"\fbox{12} done", r"\fbox{12}"),
        (r"\boxed{1} then \fbox{2}", r"\boxed{1}"),  # \boxed wins over a later \fbox
        ("no box at all", None),
        (r"\boxed{unclosed {inner}", None),
        ("", None),
    ],
)
def test_last_boxed_only_string(text: str, expected: str | None) -> None:
    assert last_boxed_only_string(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (r"Thus $\boxed{\left(3, \frac{\pi}{2}\right)}$.", r"\left(3, \frac{\pi}{2}\right)"),
        (r"\boxed{\{1,\{2\}\}}", r"\{1,\{2\}\}"),
        (r"first \boxed{1}, second \boxed{2}, last \boxed{3}", "3"),
        (r"$\boxed 5$", "5"),
        (r"\fbox{5}", ""),
        ("The answer is 5.", ""),
        (r"\boxed{5", ""),
        (r"\boxed{ 1 }", " 1 "),  # raw: no normalisation here (votes compare raw strings)
    ],
)
def test_extract_boxed_answer(text: str, expected: str) -> None:
    assert extract_boxed_answer(text) == expected


def test_remove_boxed_rejects_other_wrappers() -> None:
    assert remove_boxed(r"\boxed{x}") == "x"
    assert remove_boxed(r"\boxed x") == "x"
    for bad in (r"\fbox{x}", r"\boxed{x", "x", r"a\boxed{x}"):
        with pytest.raises(ValueError):
            remove_boxed(bad)


# ---- strip_string / is_equiv_strict ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "stripped"),
    [
        (r"\dfrac12", r"\frac{1}{2}"),
        (r"\tfrac1{2}", r"\frac{1}{2}"),
        ("0.5", r"\frac{1}{2}"),
        ("x = 5", "5"),
        ("10\\%", "10"),
        ("1/2", r"\frac{1}{2}"),
        ("5^\\circ", "5"),
        ("90^{\\circ}", "90"),
        ("5 \\text{ cm}", "5"),
        ("\\$10", "10"),
        (".5", r"\frac{1}{2}"),
        ("\\sqrt3", r"\sqrt{3}"),
        ("2\\sqrt{3}", r"2\sqrt{3}"),
        ("(-\\infty, 3]", r"(-\infty,3]"),
        ("\\left( 1, 2 \\right)", "(1,2)"),
        ("a\\\\b", r"a\b"),
        ("\\!1,\\!000", "1,000"),
        ("1\n2", "12"),
        ("abc = 5", "abc=5"),  # left side longer than 2 characters: kept
        ("a/b", "a/b"),
        ("-1/2", "\\frac{-1}{2}"),
        ("", ""),
    ],
)
def test_strip_string(raw: str, stripped: str) -> None:
    assert strip_string(raw) == stripped


@pytest.mark.parametrize(
    "raw",
    [
        "1\\frac",  # empty piece after \frac
        "\\sqrt",  # empty piece after \sqrt
        "1 \\text{ m} \\text{ s}",  # two units
    ],
)
def test_strip_string_raises_like_the_reference(raw: str) -> None:
    with pytest.raises((IndexError, ValueError)):
        strip_string(raw)


def test_strip_string_short_frac_piece_is_left_alone() -> None:
    assert strip_string("\\frac1") == "\\frac1"


@pytest.mark.parametrize(
    ("a", "b", "equal"),
    [
        ("\\dfrac12", "\\frac{1}{2}", True),
        ("0.5", "\\frac{1}{2}", True),
        ("x = 5", "5", True),
        ("10\\%", "10", True),
        ("1/2", "\\frac{1}{2}", True),
        ("142.0", "142", False),
        ("070", "70", False),
        ("(-\\infty, 3]", "(-\\infty,3]", True),
        ("\\left(-\\infty, 3\\right]", "(-\\infty, 3]", True),
        ("(-\\infty, 3)", "(-\\infty, 3]", False),
        ("(1, 2)", "(1,2)", True),
        ("(1, 2)", "(2, 1)", False),
        ("5^\\circ", "5", True),
        ("12 \\text{ cm}", "12", True),
        ("\\frac{2}{4}", "\\frac{1}{2}", False),
        ("3", "4", False),
    ],
)
def test_is_equiv_strict(a: str, b: str, equal: bool) -> None:
    assert is_equiv_strict(a, b) is equal
    assert is_equiv_strict(b, a) is equal


def test_is_equiv_strict_falls_back_to_raw_equality() -> None:
    # strip_string raises IndexError on a trailing \frac: raw strings are compared instead.
    assert is_equiv_strict("1\\frac", "1\\frac") is True
    assert is_equiv_strict("1 \\frac", "1\\frac") is False  # would be equal after space removal
    assert is_equiv_strict("\\sqrt", "\\sqrt") is True


def test_is_equiv_strict_none() -> None:
    assert is_equiv_strict(None, None) is True
    assert is_equiv_strict("1", None) is False
    assert is_equiv_strict(None, "1") is False


@pytest.mark.parametrize(
    ("response", "truth", "score"),
    [
        (r"so the answer is $\boxed{\dfrac{1}{2}}$.", "0.5", 1.0),
        (r"$\boxed{1}$ no wait $\boxed{2}$", "2", 1.0),
        (r"$\boxed{1}$ no wait $\boxed{2}$", "1", 0.0),
        (r"$\boxed{142}$", "142.0", 0.0),
        (r"\fbox{7}", "7", 0.0),
        ("The answer is 7", "7", 0.0),
        (r"\boxed{7}", None, 0.0),
        (r"\boxed{1\frac}", "1\\frac", 1.0),  # raw-equality fallback
    ],
)
def test_strict_score(response: str, truth: str | None, score: float) -> None:
    assert strict_score(response, truth) == score


def test_extract_gsm8k_answer() -> None:
    assert extract_gsm8k_answer("He pays 2 * 500 = <<2*500=1000>>1000.\n#### 1,000 ") == "1000"
    assert extract_gsm8k_answer("a #### 1 #### -5") == "-5"
    assert extract_gsm8k_answer("no marker 12") == "no marker 12"


# ---- real answers from the shared data -------------------------------------------------------------------


@pytest.mark.requires_shared_data
def test_math500_boxed_solutions_match_answers() -> None:
    rows = _read_jsonl(_benchmark("math500/test.jsonl"))
    assert len(rows) == 500
    matched = sum(is_equiv_strict(extract_boxed_answer(r["solution"]), r["answer"]) for r in rows)
    rate = matched / len(rows)
    # Measured: 500/500 (1.0). Allow one miss at most.
    assert rate >= 0.998, f"MATH500 extraction agreement {matched}/{len(rows)}"
    assert all(strict_score(r["solution"], r["answer"]) == 1.0 for r in rows[:50])


@pytest.mark.requires_shared_data
def test_gsm8k_answers_are_integers() -> None:
    rows = _read_jsonl(_benchmark("gsm8k/test.jsonl"))
    answers = [extract_gsm8k_answer(r["answer"]) for r in rows]
    assert len(answers) == 1319
    assert answers[:4] == ["18", "3", "70000", "540"]
    assert all(re.fullmatch(r"-?\d+", a) for a in answers)
    assert all(strict_score(f"so $\\boxed{{{a}}}$", a) == 1.0 for a in answers)


@pytest.mark.requires_shared_data
def test_amc_float_answers_never_match_integers_under_strict() -> None:
    rows = json.loads(_benchmark("amc/test.json").read_text())
    answers = [r["answer"] for r in rows]
    assert len(answers) == 83
    assert answers[0] == "142.0"
    assert all(re.fullmatch(r"-?\d+\.0", a) for a in answers)
    # The caveat of methods.md section 2: an integer answer never matches the "142.0"-style truth.
    assert all(strict_score(f"\\boxed{{{int(float(a))}}}", a) == 0.0 for a in answers)
    assert all(strict_score(f"\\boxed{{{a}}}", a) == 1.0 for a in answers)


@pytest.mark.requires_shared_data
def test_aime25_zero_padded_answers() -> None:
    rows = json.loads(_benchmark("aime25/test.json").read_text())
    answers = [r["answer"] for r in rows]
    assert len(answers) == 30
    assert answers[0] == "070"
    assert all(re.fullmatch(r"\d{3}", a) for a in answers)
    padded = [a for a in answers if a.startswith("0")]
    assert len(padded) == 9
    scores = {a: strict_score(f"\\boxed{{{int(a)}}}", a) for a in answers}
    assert all(scores[a] == 0.0 for a in padded)
    assert all(scores[a] == 1.0 for a in answers if a not in padded)
