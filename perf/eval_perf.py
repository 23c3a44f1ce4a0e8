r"""Scoring timings (issue 5 targets, 2 cores).

1. math-verify: 4,000 responses (MATH500 x 8 samples) scored by ``score_responses(..., ["math_verify"])`` with 2
   workers must be at least 3x faster than a plain sequential loop that calls math-verify (parse gold, parse answer,
   verify: ``compare_in_process``, the function the workers run) on every (extracted answer, gold) pair, with
   identical verdicts (the script exits 1 on any mismatch). The samples are built from the real MATH500 solutions:
   each is the solution (with a lead-in) whose final ``\boxed{}`` holds an answer drawn per problem from a small set
   (the gold as written, an equivalent form where one is easy, 1-3 wrong answers), most samples of a problem
   agreeing, as in real sampling. The worst case (every pair distinct) is timed too.
2. strict: 100,000 responses of a few KB scored by ``score_responses(..., ["strict"])``: target under 10 s.
3. metrics: the four metric kinds with 1,000 bootstrap resamples over 5,000 problems x 8 samples.

Needs ../shared/data/benchmarks/math500/test.jsonl (skips with a message otherwise).
Usage: .venv/bin/python perf/eval_perf.py
"""

from __future__ import annotations

import json
import logging
import os
import platform
import random
import sys
import time
from pathlib import Path

import numpy as np

from corewarding.evaluation.metrics import compute_metric
from corewarding.evaluation.scoring import score_responses
from corewarding.grading.answers import last_boxed_only_string
from corewarding.grading.equivalence import MathVerifyChecker, compare_in_process

MATH500 = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "benchmarks" / "math500" / "test.jsonl"
SAMPLES = 8
LEAD_INS = ["", "Let's think step by step.\n\n", "We solve the problem carefully.\n\n", "Solution:\n"]


def equivalent_form(gold: str) -> str | None:
    r"""An easy equivalent rewrite of ``gold`` (None when there is none)."""
    if gold.lstrip("-").isdigit():
        return f"{gold}.0"
    if "\\frac" in gold:
        return gold.replace("\\frac", "\\dfrac")
    if "," in gold:
        return gold.replace(",", ", ").replace(",  ", ", ")
    return None


def wrong_answers(gold: str, pool: list[str], rng: random.Random) -> list[str]:
    """1-3 wrong answers: neighbours of an integer gold, otherwise other problems' golds."""
    count = rng.randint(1, 3)
    if gold.lstrip("-").isdigit():
        return [str(int(gold) + delta) for delta in (1, -1, 2)][:count]
    return [answer for answer in rng.sample(pool, count + 1) if answer != gold][:count]


def make_response(solution: str, answer: str, rng: random.Random, repeats: int = 1) -> str:
    r"""The solution with a lead-in (its body ``repeats`` times) whose last ``\boxed{}`` holds ``answer``."""
    boxed = last_boxed_only_string(solution)
    body = solution.rsplit(boxed, 1)[0] if boxed else solution + "\nThe answer is $"
    tail = solution.rsplit(boxed, 1)[1] if boxed else "$."
    text = "\n\nLet me check that again.\n\n".join([body] * repeats)
    return rng.choice(LEAD_INS) + text + f"\\boxed{{{answer}}}{tail}"


def build(rows: list[dict[str, str]], samples: int, seed: int, repeats: tuple[int, int] = (1, 1)) -> tuple[list, list]:
    """Responses and golds, ``samples`` per problem; most samples of a problem agree."""
    rng = random.Random(seed)
    pool = [row["answer"] for row in rows]
    responses, golds = [], []
    for row in rows:
        gold = row["answer"]
        right = [gold] + [form for form in [equivalent_form(gold)] if form]
        candidates = right + wrong_answers(gold, pool, rng)
        dominant = rng.choice(candidates)  # the answer most samples give
        for _ in range(samples):
            answer = dominant if rng.random() < 0.7 else rng.choice(candidates)
            responses.append(make_response(row["solution"], answer, rng, rng.randint(*repeats)))
            golds.append(gold)
    return responses, golds


def all_distinct(rows: list[dict[str, str]], samples: int, seed: int) -> tuple[list, list]:
    """Worst case: every (answer, gold) pair distinct (answers drawn from the golds of other problems)."""
    rng = random.Random(seed)
    pool = sorted({row["answer"] for row in rows})
    responses, golds = [], []
    for row in rows:
        for answer in rng.sample(pool, samples):
            responses.append(make_response(row["solution"], answer, rng))
            golds.append(row["answer"])
    return responses, golds


def math_verify_race(label: str, responses: list[str], golds: list[str]) -> bool:
    """Time the plain loop against score_responses with 2 workers; print the figures; True if verdicts agree."""
    extracted = score_responses(responses, golds, checkers=[]).extracted
    pairs = list(zip(extracted, golds, strict=True))
    compare_in_process("1", "1")  # imports, as the workers do before reporting ready
    start = time.perf_counter()
    baseline = [compare_in_process(answer, gold)[0] for answer, gold in pairs]
    plain_s = time.perf_counter() - start

    with MathVerifyChecker(workers=2, timeout_s=5.0) as checker:
        start = time.perf_counter()
        cold = score_responses(responses, golds, checkers=["math_verify"], math_verify=checker)
        cold_s = time.perf_counter() - start
    with MathVerifyChecker(workers=2, timeout_s=5.0) as checker:  # fresh workers (empty parse caches)
        start = time.perf_counter()
        checker.start()
        startup_s = time.perf_counter() - start
        start = time.perf_counter()
        warm = score_responses(responses, golds, checkers=["math_verify"], math_verify=checker)
        warm_s = time.perf_counter() - start

    unique = cold.counts["unique_pairs"]
    print(f"\n[{label}] {len(pairs)} responses, {unique} distinct (answer, gold) pairs ({unique / len(pairs):.0%})")
    print(f"  plain sequential math-verify loop        {plain_s:7.2f} s")
    print(f"  score_responses, 2 workers (cold start)  {cold_s:7.2f} s   speedup {plain_s / cold_s:5.1f}x")
    print(f"  score_responses, 2 workers started first {warm_s:7.2f} s   speedup {plain_s / warm_s:5.1f}x")
    print(f"  (starting the 2 workers: {startup_s:.2f} s, once per checker)")
    print(f"  correct: {sum(baseline)} plain, {sum(cold.correct_math_verify or [])} ours; counts {cold.counts}")
    same = baseline == cold.correct_math_verify == warm.correct_math_verify
    mismatches = sum(a != b for a, b in zip(baseline, cold.correct_math_verify or [], strict=True))
    print(f"  verdicts identical: {same}" + ("" if same else f"  ({mismatches} MISMATCHES)"))
    return same


def strict_timing(rows: list[dict[str, str]]) -> None:
    """Time strict scoring of 100,000 responses of a few KB."""
    responses, golds = build(rows, 200, seed=1, repeats=(2, 6))
    mean_kb = sum(map(len, responses)) / len(responses) / 1000
    start = time.perf_counter()
    scored = score_responses(responses, golds, checkers=["strict"])
    seconds = time.perf_counter() - start
    verdict = "ok" if seconds < 10.0 else "OVER TARGET"
    unique = scored.counts["unique_pairs"]
    print(f"\n[strict] {len(responses)} responses (mean {mean_kb:.1f} KB), {unique} distinct pairs")
    print(f"  score_responses(..., ['strict'])  {seconds:6.2f} s  (target < 10 s: {verdict})")
    print(f"  correct: {sum(scored.correct_strict or [])}")


def metrics_timing() -> None:
    """Time each metric kind with 1,000 bootstrap resamples over 5,000 problems x 8 samples."""
    rng = np.random.default_rng(0)
    correct = (rng.random((5000, SAMPLES)) < 0.6).tolist()
    answers = [[str(a) for a in row] for row in rng.integers(0, 3, (5000, SAMPLES))]
    print("\n[metrics] 5,000 problems x 8 samples, 1,000 bootstrap resamples")
    for name in ("pass@1", "avg@8", "pass@4", "maj@8"):
        start = time.perf_counter()
        value = compute_metric(name, correct, answers, bootstrap=1000)
        seconds = time.perf_counter() - start
        print(f"  {name:<7} {value.value:.4f} [{value.ci_low:.4f}, {value.ci_high:.4f}]  {seconds:5.2f} s")


def main() -> int:
    if not MATH500.is_file():
        print(f"skipped: {MATH500} is absent", file=sys.stderr)
        return 0
    logging.basicConfig(level=logging.ERROR)
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    machine = platform.processor() or platform.machine()
    print(f"machine: {machine}, {os.cpu_count()} cores, Python {platform.python_version()}")
    rows = [json.loads(line) for line in MATH500.read_text().splitlines() if line.strip()]
    ok = math_verify_race("MATH500 x 8, realistic agreement", *build(rows, SAMPLES, seed=0))
    ok &= math_verify_race("MATH500 x 8, every pair distinct (worst case)", *all_distinct(rows, SAMPLES, seed=0))
    strict_timing(rows)
    metrics_timing()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
