"""math-verify equivalence in worker processes with hard timeouts (corewarding.grading.equivalence)."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from corewarding.grading.equivalence import MathVerifyChecker, Verdict, compare_in_process

SHARED_DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"

POWER_TOWER = r"\boxed{9^{9^{9^{9^{9}}}}}"  # sympy tries to evaluate it: hangs
NESTED_BRACES = r"\boxed{" + "{" * 5000 + "1" + "}" * 5000 + "}"  # the parser hangs


def _child_pids() -> set[int]:
    return {p.pid for p in multiprocessing.active_children() if p.pid is not None}


@pytest.fixture(scope="module")
def checker() -> Iterator[MathVerifyChecker]:
    with MathVerifyChecker(workers=2, timeout_s=5.0) as shared:
        yield shared


# What math-verify 0.9.0 says (observed), with bare answers wrapped in $...$ by the checker.
AGREEMENT_CASES = [
    ("142.0", "142", True),
    ("142", "142.0", True),
    ("\\frac{1}{2}", "0.5", True),
    ("0.5", "\\frac{1}{2}", True),
    ("\\dfrac12", "\\frac{1}{2}", True),
    ("1/2", "\\frac{1}{2}", True),
    ("070", "70", True),
    ("70", "070", True),
    ("x = 5", "5", True),
    ("10\\%", "10", True),
    ("5^\\circ", "5", True),
    ("(-\\infty, 3]", "(-\\infty,3]", True),
    ("(-\\infty, 3)", "(-\\infty,3]", False),
    ("[-1, 2]", "[-1,2]", True),
    ("[-1, 2]", "(-1,2)", False),
    ("(1, 2)", "(1,2)", True),
    ("(1, 2)", "\\left(1, 2\\right)", True),
    ("(1,2)", "(2,1)", False),
    ("\\{1,2\\}", "\\{2,1\\}", True),
    ("2, 3", "3, 2", True),  # read as sets
    ("\\sqrt{2}", "1.41421356", True),  # numeric comparison at 6 decimals
    ("\\frac{1}{3}", "0.33", False),
    ("3", "4", False),
    ("\\frac{2}{4}", "\\frac{1}{2}", True),
    ("The final answer is $\\boxed{142}$.", "142.0", True),  # a whole response
    ("so \\boxed{\\frac12}", "0.5", True),
    ("no number here", "5", False),
]


@pytest.mark.parametrize(("answer", "gold", "equal"), AGREEMENT_CASES)
def test_math_verify_verdicts(checker: MathVerifyChecker, answer: str, gold: str, equal: bool) -> None:
    verdict = checker.equivalent(answer, gold)
    assert verdict.status == "ok"
    assert verdict.equal is equal, verdict


def test_equivalent_many_keeps_order(checker: MathVerifyChecker) -> None:
    pairs = [(a, g) for a, g, _ in AGREEMENT_CASES]
    verdicts = checker.equivalent_many(pairs)
    assert [v.equal for v in verdicts] == [e for _, _, e in AGREEMENT_CASES]
    assert checker.equivalent_many([]) == []


def test_verdicts_equal_the_plain_in_process_comparison(checker: MathVerifyChecker) -> None:
    # the workers cache parses; their verdicts are those of the uncached function a sequential loop would call
    pairs = [(a, g) for a, g, _ in AGREEMENT_CASES] + [(g, a) for a, g, _ in AGREEMENT_CASES]
    assert [v.equal for v in checker.equivalent_many(pairs)] == [compare_in_process(a, g)[0] for a, g in pairs]


@pytest.mark.slow
def test_a_timeout_inside_a_batch_keeps_the_other_verdicts() -> None:
    # one worker and 12 distinct pairs of one gold: batches of 3 items; the power tower is the 2nd of the 1st batch
    pairs = [(str(i), "5") for i in range(12)]
    pairs[1] = (POWER_TOWER, "5")
    with MathVerifyChecker(workers=1, timeout_s=1.5) as single:
        single.start()
        first_pid = single._slots[0].proc.pid
        start = time.monotonic()
        verdicts = single.equivalent_many(pairs)
        assert time.monotonic() - start < 1.5 + 5.0
        assert verdicts[1] == Verdict(False, "timeout", "no verdict within 1.5s")
        assert [v.equal for v in verdicts] == [i == 5 for i in range(12)]  # "5" == "5" only
        assert [v.status for i, v in enumerate(verdicts) if i != 1] == ["ok"] * 11  # the re-queued ones too
        assert single.stats == {"ok": 11, "timeout": 1}
        assert single._slots[0].proc.pid != first_pid  # the overrunning worker was replaced


def test_empty_inputs_are_not_equal() -> None:
    before = _child_pids()
    with MathVerifyChecker(workers=1) as idle:
        assert idle.equivalent("", "5") == Verdict(False, "ok", "empty input")
        assert idle.equivalent_many([("  ", ""), ("", "5")]) == [Verdict(False, "ok", "empty input")] * 2
        assert idle.stats == {"ok": 3}  # 1 + 2 unique pairs
        assert _child_pids() == before  # answered without starting a worker


def test_duplicate_pairs_are_scored_once() -> None:
    with MathVerifyChecker(workers=1, timeout_s=5.0) as fresh:
        verdicts = fresh.equivalent_many([("142.0", "142"), ("1", "2"), ("142.0", "142"), ("142.0", "142")])
        assert [v.equal for v in verdicts] == [True, False, True, True]
        assert fresh.stats == {"ok": 2}
        fresh.equivalent("142.0", "142")  # no cache across calls
        assert fresh.stats == {"ok": 3}


def test_works_from_a_non_main_thread(checker: MathVerifyChecker) -> None:
    results: list[list[Verdict]] = []
    thread = threading.Thread(
        target=lambda: results.append(checker.equivalent_many([("0.5", "\\frac{1}{2}"), ("1", "2")]))
    )
    thread.start()
    thread.join(30)
    assert not thread.is_alive()
    assert results == [[Verdict(True, "ok"), Verdict(False, "ok")]]


def test_long_response_is_fine(checker: MathVerifyChecker) -> None:
    response = "Let us think. " * 7500 + "So the answer is $\\boxed{5}$."
    assert len(response) > 100_000
    start = time.monotonic()
    assert checker.equivalent(response, "5") == Verdict(True, "ok")
    assert time.monotonic() - start < 30.0  # a hang guard, not a timing (a busy machine adds seconds)


@pytest.mark.slow
def test_pathological_inputs_time_out_and_workers_recover() -> None:
    timeout_s = 1.0
    with MathVerifyChecker(workers=2, timeout_s=timeout_s) as fast:
        assert fast.equivalent_many([("1", "1"), ("2", "2")]) == [Verdict(True, "ok")] * 2  # workers ready
        start = time.monotonic()
        verdicts = fast.equivalent_many([(POWER_TOWER, "1"), (NESTED_BRACES, "1")])
        elapsed = time.monotonic() - start
        assert elapsed < timeout_s + 20.0  # the items hang without the timeout; a busy machine adds seconds
        assert [v.equal for v in verdicts] == [False, False]
        assert all(v.status in ("timeout", "error") for v in verdicts)
        assert fast.stats["timeout"] + fast.stats["error"] == 2
        # The killed workers were replaced: the checker still answers.
        assert fast.equivalent("0.5", "\\frac{1}{2}") == Verdict(True, "ok")
        assert fast.stats["ok"] == 3


def test_a_dying_worker_gives_error() -> None:
    with MathVerifyChecker(workers=1, timeout_s=30.0) as fragile:
        assert fragile.equivalent("1", "1").equal
        pid = fragile._slots[0].proc.pid
        assert pid is not None
        threading.Timer(0.5, os.kill, args=(pid, signal.SIGKILL)).start()
        verdict = fragile.equivalent(POWER_TOWER, "1")  # busy for ever until killed
        assert verdict.equal is False
        assert verdict.status == "error"
        assert "died" in verdict.detail
        assert fragile.stats["error"] == 1
        assert fragile.equivalent("2", "2") == Verdict(True, "ok")


def test_lazy_start_and_close_leaves_no_children() -> None:
    before = _child_pids()
    lazy = MathVerifyChecker(workers=2, timeout_s=5.0)
    assert _child_pids() == before  # nothing started yet
    assert lazy.equivalent("1", "1.0").equal
    assert len(_child_pids() - before) == 2
    lazy.close()
    assert _child_pids() <= before
    # Usable again after close (new workers), and closed again by the context manager.
    with lazy:
        assert lazy.equivalent("2", "2.0").equal
    assert _child_pids() <= before


def test_invalid_arguments() -> None:
    with pytest.raises(ValueError):
        MathVerifyChecker(workers=0)
    with pytest.raises(ValueError):
        MathVerifyChecker(timeout_s=0)


@pytest.mark.requires_shared_data
def test_benchmark_answers_agree_under_math_verify(checker: MathVerifyChecker) -> None:
    benchmarks = SHARED_DATA / "benchmarks"
    amc, aime = benchmarks / "amc" / "test.json", benchmarks / "aime25" / "test.json"
    if not (amc.is_file() and aime.is_file()):
        pytest.skip(f"shared benchmark files under {benchmarks} are absent")
    golds = [r["answer"] for r in json.loads(amc.read_text())] + [r["answer"] for r in json.loads(aime.read_text())]
    pairs = [(f"The answer is $\\boxed{{{int(float(g))}}}$.", g) for g in golds]
    verdicts = checker.equivalent_many(pairs)
    failed = [p for p, v in zip(pairs, verdicts, strict=True) if v != Verdict(True, "ok")]
    assert not failed, failed
    wrong = checker.equivalent_many([(f"\\boxed{{{int(float(g)) + 1}}}", g) for g in golds])
    assert not any(v.equal for v in wrong)
