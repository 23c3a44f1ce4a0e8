"""The math-verify side of :mod:`corewarding.grading.equivalence`: parsing, comparison and the worker-process loop.

:func:`compare_in_process` is the plain comparison (parse gold, parse answer, verify; no timeouts, no cache);
the workers run the same function with a bounded cache of parsed strings (:class:`ParseCache`), so their verdicts
equal those of a plain sequential loop. Only the worker loop should run pathological inputs: nothing here can
interrupt a parse that never ends.
"""

from __future__ import annotations

import collections
import logging
import signal
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

__all__ = ["ParseCache", "compare_in_process", "parse_math", "prepare_for_parse", "warm_up", "worker_main"]

Parser = Callable[[str], list[Any]]

# Typical answer shapes: parsing them fills the LaTeX parser's prediction caches (ANTLR's DFA), which otherwise
# make the first few hundred parses of a fresh process several times slower.
_WARM_UP = [
    ("\\frac{1}{2}", "0.5"),
    ("\\dfrac{3\\sqrt{2}}{4}", "\\frac{3}{4}\\sqrt2"),
    ("(-\\infty, 3]", "[1, 2)"),
    ("\\left( 3, \\frac{\\pi}{2} \\right)", "(1,2)"),
    ("\\{1, 2\\}", "3, 5, 7"),
    ("x = 5", "y = 2x + 1"),
    ("90^\\circ", "10\\%"),
    ("\\text{Evelyn}", "\\text{(C)}"),
    ("6 - 5i", "52_8"),
    ("x^2 + 2x + 1", "(x+1)^2"),
    ("\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}", "2\\pi"),
    ("\\sqrt{51}", "-\\frac{14}{3}"),
]


def prepare_for_parse(text: str) -> str:
    r"""Wrap a bare answer in ``$...$`` so math-verify's LaTeX extraction reads it whole.

    Strings that already carry math delimiters or a box are returned unchanged.

    >>> prepare_for_parse("(1, 2)")
    '$(1, 2)$'
    >>> prepare_for_parse(r"so $x=1$")
    'so $x=1$'
    >>> prepare_for_parse(r"\boxed{3}")
    '\\boxed{3}'
    """
    unescaped = text.replace("\\$", "")
    if any(marker in unescaped for marker in ("$", "\\boxed", "\\fbox", "\\(", "\\[")):
        return text
    return f"${text.strip()}$"


def parse_math(text: str) -> list[Any]:
    """Parse ``text`` with math-verify's default config (bare answers wrapped first; no internal timeout)."""
    from math_verify import parse  # math_verify: imported when used

    prepared = prepare_for_parse(text)
    parsed = parse(prepared, parsing_timeout=None, raise_on_error=True)
    if not parsed and prepared != text:
        parsed = parse(text, parsing_timeout=None, raise_on_error=True)
    return list(parsed)


class ParseCache:
    """A bounded LRU cache in front of :func:`parse_math`; failures are not cached, long texts are not kept."""

    def __init__(self, max_entries: int = 4096, max_chars: int = 10_000) -> None:
        """Keep at most ``max_entries`` parses, of texts up to ``max_chars`` characters."""
        self.max_entries = max_entries
        self.max_chars = max_chars
        self._entries: collections.OrderedDict[str, list[Any]] = collections.OrderedDict()

    def __call__(self, text: str) -> list[Any]:
        """Return the parse of ``text`` (a fresh list; the parsed objects are immutable sympy values)."""
        cached = self._entries.get(text)
        if cached is not None:
            self._entries.move_to_end(text)
            return list(cached)
        parsed = parse_math(text)
        if len(text) <= self.max_chars:
            self._entries[text] = parsed
            if len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
        return list(parsed)


def compare_in_process(answer: str, gold: str, parse: Parser = parse_math) -> tuple[bool, str]:
    r"""Parse gold and answer and verify them, in this process and without any timeout.

    Returns ``(equal, detail)``; raises what math-verify raises. Meant for the workers and for baselines and
    tests on well-behaved inputs; use :class:`corewarding.grading.equivalence.MathVerifyChecker` for anything else.

    >>> compare_in_process(r"\dfrac12", "0.5")
    (True, '')
    """
    from math_verify import verify  # math_verify: imported when used

    parsed_gold = parse(gold)
    if not parsed_gold:
        return False, "gold not parsed"
    parsed_answer = parse(answer)
    if not parsed_answer:
        return False, "answer not parsed"
    return bool(verify(parsed_gold, parsed_answer, timeout_seconds=None)), ""


_warmed_up = False


def warm_up() -> None:
    """Import math-verify and run it on typical answers (fills the parser caches of this process; once)."""
    global _warmed_up
    if _warmed_up:
        return
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    for answer, gold in _WARM_UP:
        compare_in_process(answer, gold)
    _warmed_up = True


def worker_main(conn: Connection) -> None:
    """Loop of a worker process: receive a batch ``[(task_id, answer, gold), ...]``, reply once per item."""

    # Ctrl-C goes to the whole process group; the parent shuts the workers down itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    cache = ParseCache()
    try:
        warm_up()  # done already when the forkserver warmed up before forking this worker
    except Exception:
        conn.send(("fatal", traceback.format_exc(limit=5)))
        return
    conn.send(("ready",))
    while True:
        try:
            batch = conn.recv()
        except (EOFError, OSError):
            return
        if batch is None:
            return
        for task_id, answer, gold in batch:
            try:
                equal, detail = compare_in_process(answer, gold, cache)
                reply = ("result", task_id, equal, "ok", detail)
            except Exception as exc:
                reply = ("result", task_id, False, "error", f"{type(exc).__name__}: {str(exc)[:200]}")
            conn.send(reply)
