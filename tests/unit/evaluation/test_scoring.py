"""Scoring responses under the strict and the math-verify checker (corewarding.evaluation.scoring)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from corewarding.evaluation.scoring import score_responses
from corewarding.grading.equivalence import MathVerifyChecker


@pytest.fixture(scope="module")
def checker() -> Iterator[MathVerifyChecker]:
    with MathVerifyChecker(workers=2, timeout_s=5.0) as shared:
        yield shared


def boxed(answer: str) -> str:
    return f"Some reasoning first. So the answer is $\\boxed{{{answer}}}$."


# (boxed answer, gold, strict verdict, math-verify verdict): observed with math-verify 0.9.0, checked by hand.
AGREEMENT = [
    ("142.0", "142", False, True),
    ("070", "70", False, True),
    ("0.50", "0.5", False, True),
    ("1,000", "1000", False, True),
    ("\\dfrac12", "0.5", True, True),
    ("\\frac{1}{2}", "0.5", True, True),
    ("1/2", "\\frac12", True, True),
    ("-\\frac{1}{2}", "-0.5", False, True),
    ("\\frac{14}{3}", "4\\frac{2}{3}", False, True),  # a mixed number
    ("2\\sqrt{3}", "\\sqrt{12}", False, True),
    ("\\sqrt{2}/2", "\\frac{\\sqrt{2}}{2}", False, True),
    ("x^2+2x+1", "(x+1)^2", False, True),
    ("\\pi", "3.14159", False, False),
    ("3", "4", False, False),
    ("x = 5", "5", True, True),
    ("y = 2x+1", "2x+1", True, True),
    ("10\\%", "10", True, True),
    ("90^\\circ", "90", True, True),
    ("(-\\infty, 3]", "(-\\infty,3]", True, True),
    ("\\left( -\\infty, 3 \\right]", "(-\\infty,3]", True, True),
    ("(-\\infty, 3)", "(-\\infty,3]", False, False),
    ("(1,2)", "(1, 2)", True, True),
    ("(2,1)", "(1, 2)", False, False),
    ("\\{1,2\\}", "\\{2,1\\}", False, True),
    ("3, 5, 7", "3,5,7", True, True),
    ("7, 5, 3", "3,5,7", False, True),
    ("\\text{(C)}", "C", False, True),
    ("\\text{C}", "C", False, True),
    ("Evelyn", "\\text{Evelyn}", False, True),
    ("6 - 5i", "6-5i", True, True),
    ("42_8", "52_8", False, False),
]


@pytest.mark.parametrize(("answer", "gold", "strict", "math_verify"), AGREEMENT)
def test_checker_agreement_table(
    checker: MathVerifyChecker, answer: str, gold: str, strict: bool, math_verify: bool
) -> None:
    scored = score_responses([boxed(answer)], [gold], math_verify=checker)
    assert scored.extracted == [answer]
    assert scored.correct_strict == [strict]
    assert scored.correct_math_verify == [math_verify]


def test_the_whole_table_in_one_call_keeps_order(checker: MathVerifyChecker) -> None:
    scored = score_responses([boxed(a) for a, *_ in AGREEMENT], [g for _, g, *_ in AGREEMENT], math_verify=checker)
    assert scored.correct_strict == [s for *_, s, _ in AGREEMENT]
    assert scored.correct_math_verify == [m for *_, m in AGREEMENT]
    assert scored.counts == {
        "no_answer": 0,
        "missing_gold": 0,
        "unique_pairs": len(AGREEMENT),
        "math_verify_timeout": 0,
        "math_verify_error": 0,
    }


def test_both_checkers_judge_the_last_boxed_answer_only(checker: MathVerifyChecker) -> None:
    responses = [
        "First $\\boxed{3}$, on second thought $\\boxed{4}$.",
        "The answer is 5.",  # no box: math-verify would read 5 from the text, but the extraction is ''
        "\\fbox{5}",  # found by the reference but not unwrapped: ''
        "\\boxed{5",  # unbalanced
    ]
    scored = score_responses(responses, ["4", "5", "5", "5"], math_verify=checker)
    assert scored.extracted == ["4", "", "", ""]
    assert scored.correct_strict == [True, False, False, False]
    assert scored.correct_math_verify == [True, False, False, False]
    assert scored.counts["no_answer"] == 3


def test_missing_golds_are_wrong_and_counted(checker: MathVerifyChecker) -> None:
    responses = [boxed("7"), boxed(""), boxed("7"), "no box", boxed("7")]
    golds = ["7", "", None, "", "  "]
    scored = score_responses(responses, golds, math_verify=checker)
    assert scored.correct_strict == [True, False, False, False, False]
    assert scored.correct_math_verify == [True, False, False, False, False]
    assert scored.counts["missing_gold"] == 4
    assert scored.counts["no_answer"] == 2
    assert scored.counts["unique_pairs"] == 4  # None and "" golds are the same blank gold


def test_identical_pairs_are_judged_once() -> None:
    with MathVerifyChecker(workers=1, timeout_s=5.0) as fresh:
        responses = [boxed("142.0"), boxed("142.0"), "x " + boxed("142.0"), boxed("141")] * 5
        scored = score_responses(responses, ["142"] * 20, checkers=["math_verify"], math_verify=fresh)
        assert scored.correct_math_verify == [True, True, True, False] * 5
        assert scored.correct_strict is None
        assert scored.counts["unique_pairs"] == 2
        assert fresh.stats == {"ok": 2}


def test_only_the_requested_checkers_run() -> None:
    scored = score_responses([boxed("1")], ["1"], checkers=["strict"])
    assert (scored.correct_strict, scored.correct_math_verify) == ([True], None)
    assert "math_verify_timeout" not in scored.counts
    assert score_responses([], [], checkers=["strict"]).extracted == []


def test_bad_arguments_are_named() -> None:
    with pytest.raises(ValueError, match="'sympy'"):
        score_responses([boxed("1")], ["1"], checkers=["strict", "sympy"])
    with pytest.raises(ValueError, match="2 responses but 1 golds"):
        score_responses([boxed("1"), boxed("2")], ["1"], checkers=["strict"])


POWER_TOWER = "Huge. $\\boxed{9^{9^{9^{9^{9}}}}}$"  # sympy tries to evaluate it
NESTED_BRACES = "\\boxed{" + "{" * 10_000 + "1" + "}" * 10_000 + "}"  # the LaTeX parser never finishes


@pytest.mark.slow
def test_pathological_responses_finish_in_time_and_are_counted() -> None:
    long_response = "Let us think. " * 7500 + "So the answer is $\\boxed{1}$."
    assert len(long_response) > 100_000
    responses = [POWER_TOWER, boxed("1"), NESTED_BRACES, long_response, boxed("1.0"), boxed("2")]
    golds = ["1"] * len(responses)
    timeout_s = 2.0
    with MathVerifyChecker(workers=2, timeout_s=timeout_s) as fast:
        fast.start()
        start = time.monotonic()
        scored = score_responses(responses, golds, math_verify=fast)
        elapsed = time.monotonic() - start
    # both pathological items run in parallel to their timeout; the rest is quick
    assert elapsed < 2 * timeout_s + 20.0  # the two items hang without it; a busy machine adds seconds
    assert scored.correct_math_verify == [False, True, False, True, True, False]
    assert scored.correct_strict == [False, True, False, True, False, False]
    assert scored.counts["math_verify_timeout"] + scored.counts["math_verify_error"] == 2
    assert scored.counts["no_answer"] == 0
