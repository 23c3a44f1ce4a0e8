"""Majority votes over extracted answers, with a configurable notion of "the same answer".

``exact`` is the reference: raw ``remove_boxed`` strings, no normalisation ("\\frac12" and "0.5" are different votes).
``normalized`` compares the reference's ``strip_string`` forms; ``math_verify`` clusters answers that math-verify
finds equivalent (in worker processes with hard timeouts). Ties go to the answer seen first in input order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from corewarding.grading.answers import strip_string
from corewarding.grading.equivalence import MathVerifyChecker

CANONICALIZE_MODES = ("exact", "normalized", "math_verify")


def _normalized(answer: str) -> str:
    try:
        return strip_string(answer)
    except Exception:  # the reference falls back to the raw string when strip_string fails
        return answer


class Voter:
    """Votes a label from candidate answers and tells which answers match it."""

    def __init__(self, mode: str = "exact", checker: MathVerifyChecker | None = None) -> None:
        if mode not in CANONICALIZE_MODES:
            raise ValueError(f"vote.canonicalize={mode!r}; expected one of {', '.join(CANONICALIZE_MODES)}")
        if mode == "math_verify" and checker is None:
            raise ValueError("vote.canonicalize=math_verify needs a MathVerifyChecker")
        self.mode = mode
        self.checker = checker

    def checker_counts(self) -> dict[str, int]:
        """math-verify verdicts so far by status (ok/timeout/error); empty unless mode is math_verify."""
        return dict(self.checker.stats) if self.checker is not None else {}

    def close(self) -> None:
        """Stop the math-verify workers, if any."""
        if self.checker is not None:
            self.checker.close()

    def vote_and_match(self, candidates: Sequence[str], targets: Sequence[str]) -> tuple[str | None, list[bool]]:
        """Majority of ``candidates`` (empty answers dropped) and, for each target, whether it matches it.

        >>> Voter().vote_and_match(["3", "4", "4", "3", ""], ["3", "4", ""])
        ('3', [True, False, False])
        >>> Voter().vote_and_match(["", "  "], ["1"])
        (None, [False])
        >>> Voter("normalized").vote_and_match(["\\\\frac12", "0.5", "1"], ["\\\\dfrac{1}{2}"])
        ('\\\\frac12', [True])
        """
        votes = [a for a in candidates if a is not None and a.strip()]
        if not votes:
            return None, [False] * len(targets)
        if self.mode == "math_verify":
            return self._vote_math_verify(votes, targets)
        if self.mode == "exact":  # the hot path of rescoring (a plain dict counts small groups ~4x faster than Counter)
            tally: dict[str, int] = {}
            for a in votes:
                tally[a] = tally.get(a, 0) + 1
            label = max(tally, key=tally.__getitem__)  # the first seen of equal counts, as the reference
            return label, [t == label for t in targets]  # a label is never blank, so t == label implies t is not
        key = _normalized
        votes = [a for a in votes if key(a)]  # an answer that normalises to nothing ("\\!") is no vote
        if not votes:
            return None, [False] * len(targets)
        counts: dict[str, int] = {}
        first: dict[str, str] = {}
        for a in votes:
            k = key(a)
            counts[k] = counts.get(k, 0) + 1
            first.setdefault(k, a)
        winner = max(counts, key=lambda k: counts[k])  # max keeps the first of equal counts (insertion order)
        return first[winner], [bool(t and t.strip()) and key(t) == winner for t in targets]

    def _vote_math_verify(self, votes: list[str], targets: Sequence[str]) -> tuple[str | None, list[bool]]:
        assert self.checker is not None
        uniques = list(dict.fromkeys(votes))
        pairs = [(a, b) for i, a in enumerate(uniques) for b in uniques[:i]]
        verdicts = self.checker.equivalent_many(pairs)
        same = {pair: v.equal for pair, v in zip(pairs, verdicts, strict=True)}
        rep: dict[str, str] = {}
        for i, a in enumerate(uniques):  # join the first earlier representative it is equivalent to
            rep[a] = next((r for r in uniques[:i] if rep[r] == r and same[(a, r)]), a)
        counts: dict[str, int] = {}
        for a in votes:
            counts[rep[a]] = counts.get(rep[a], 0) + 1
        label = max(counts, key=lambda k: counts[k])
        nonempty = [t for t in targets if t and t.strip()]
        checks = self.checker.equivalent_many([(t, label) for t in nonempty])
        matched = {t: t == label or v.equal for t, v in zip(nonempty, checks, strict=True)}
        return label, [matched.get(t, False) for t in targets]


def voter_from_config(vote: Any) -> Voter:
    """A Voter for the ``vote`` config section (canonicalize, math_verify_workers, math_verify_timeout_s)."""
    mode = str(vote.canonicalize)
    checker = None
    if mode == "math_verify":
        workers = vote.get("math_verify_workers")  # None: one per core (equivalence.resolve_workers)
        checker = MathVerifyChecker(workers=workers, timeout_s=float(vote.math_verify_timeout_s))
    return Voter(mode, checker)
