r"""Score responses against gold answers under the strict checker and the math-verify checker.

Both checkers judge the same extracted answer: the content of the response's last ``\boxed{...}``
(:func:`corewarding.grading.answers.extract_boxed_answer`, the reference extraction).

* ``strict``: the reference's :func:`corewarding.grading.answers.is_equiv_strict` (Hendrycks normalisation, no sympy);
* ``math_verify``: math-verify equivalence of the extracted answer and the gold, in worker processes with a hard
  per-item timeout (:class:`corewarding.grading.equivalence.MathVerifyChecker`; bare answers wrapped in ``$...$``).

A response without a usable ``\boxed{}`` has the extracted answer ``""`` and is wrong under both checkers; so is
every response whose gold is None or blank. Identical ``(extracted, gold)`` pairs are judged once. Nothing is
dropped: :attr:`Scored.counts` says how many responses had no answer or no gold, and how many math-verify verdicts
were timeouts or errors (those count as wrong).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from corewarding.eval_rows import SAMPLE_CHECKERS
from corewarding.evaluation.benchmarks import Problem
from corewarding.grading.answers import extract_boxed_answer, is_equiv_strict
from corewarding.grading.equivalence import MathVerifyChecker, Verdict

logger = logging.getLogger(__name__)

__all__ = ["CHECKERS", "Scored", "score_generations", "score_responses"]

CHECKERS = SAMPLE_CHECKERS  # strict, math_verify: the checkers that judge each sample (eval_rows.CHECKER_TABLE)


@dataclass(frozen=True)
class Scored:
    """Per-response results of :func:`score_responses` (lists in the order of the responses).

    ``counts`` are numbers of responses: ``no_answer`` (nothing extracted), ``missing_gold`` (gold None or blank),
    ``unique_pairs`` (distinct (extracted, gold) pairs), and, when math-verify ran, ``math_verify_timeout`` and
    ``math_verify_error`` (responses whose verdict was a timeout / an error, all counted wrong).
    """

    extracted: list[str]
    correct_strict: list[bool] | None
    correct_math_verify: list[bool] | None
    counts: dict[str, int]


def _judge_unique(pairs: list[tuple[str, str]], judge: Callable[[str, str], bool]) -> list[bool]:
    """``judge`` every pair, computing each distinct pair once."""
    memo: dict[tuple[str, str], bool] = {}
    out = []
    for pair in pairs:
        verdict = memo.get(pair)
        if verdict is None:
            verdict = memo[pair] = judge(*pair)
        out.append(verdict)
    return out


def _strict(answer: str, gold: str) -> bool:
    """The reference's strict equivalence; an empty answer or gold is wrong."""
    return bool(answer.strip()) and bool(gold.strip()) and is_equiv_strict(answer, gold)


def _math_verify(pairs: list[tuple[str, str]], checker: MathVerifyChecker | None) -> tuple[list[bool], dict[str, int]]:
    """math-verify verdicts for ``pairs`` (an own checker is started and closed when none is given)."""
    owned = checker is None
    active = MathVerifyChecker() if checker is None else checker
    try:
        verdicts: list[Verdict] = active.equivalent_many(pairs)
    finally:
        if owned:
            active.close()
    counts = {
        "math_verify_timeout": sum(v.status == "timeout" for v in verdicts),
        "math_verify_error": sum(v.status == "error" for v in verdicts),
    }
    return [v.equal and v.status == "ok" for v in verdicts], counts


def score_responses(
    responses: Sequence[str],
    golds: Sequence[str | None],
    checkers: Sequence[str] = CHECKERS,
    math_verify: MathVerifyChecker | None = None,
) -> Scored:
    r"""Extract each response's answer and judge it against its gold under each requested checker.

    ``math_verify`` is the checker to use (its workers are kept); without one a checker with default settings
    is started for this call and closed after it.

    >>> scored = score_responses([r"so $\boxed{142.0}$", "no box", r"\boxed{5}"], ["142", "7", None], ["strict"])
    >>> scored.extracted, scored.correct_strict, scored.correct_math_verify
    (['142.0', '', '5'], [False, False, False], None)
    >>> scored.counts
    {'no_answer': 1, 'missing_gold': 1, 'unique_pairs': 3}
    """
    unknown = [name for name in checkers if name not in CHECKERS]
    if unknown:
        raise ValueError(f"unknown checker(s) {', '.join(map(repr, unknown))}; known: {', '.join(CHECKERS)}")
    if len(responses) != len(golds):
        raise ValueError(f"{len(responses)} responses but {len(golds)} golds; they must pair up one to one")
    extracted = [extract_boxed_answer(response) for response in responses]
    gold_texts = ["" if gold is None else str(gold) for gold in golds]
    pairs = list(zip(extracted, gold_texts, strict=True))
    counts = {
        "no_answer": sum(not answer.strip() for answer in extracted),
        "missing_gold": sum(not gold.strip() for gold in gold_texts),
        "unique_pairs": len(set(pairs)),
    }
    strict = _judge_unique(pairs, _strict) if "strict" in checkers else None
    verified = None
    if "math_verify" in checkers:
        verified, mv_counts = _math_verify(pairs, math_verify)
        counts.update(mv_counts)
    if verified is not None and counts["math_verify_timeout"] + counts["math_verify_error"]:
        logger.warning(
            "math-verify: %d timeout(s) and %d error(s) among %d responses (counted wrong)",
            counts["math_verify_timeout"],
            counts["math_verify_error"],
            len(responses),
        )
    return Scored(extracted=extracted, correct_strict=strict, correct_math_verify=verified, counts=counts)


def score_generations(
    generations: Sequence[dict[str, Any]],
    problems: Sequence[Problem],
    checkers: Sequence[str],
    math_verify: MathVerifyChecker | None = None,
) -> Scored:
    """Score a unit's generations (each names its ``problem_id`` and holds a ``response``) against the golds of
    their problems (:func:`score_responses`, in the order of the generations)."""
    gold_of = {p.problem_id: p.gold for p in problems}
    responses = [g["response"] for g in generations]
    return score_responses(responses, [gold_of[g["problem_id"]] for g in generations], checkers, math_verify)
