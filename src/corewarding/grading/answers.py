r"""Reference-compatible answer extraction and strict string normalisation.

This module reproduces the behaviour of the Hendrycks MATH grader as used by verl's
``reward_score/math.py`` (the ground-truth reward of the Co-rewarding repositories):

* :func:`last_boxed_only_string` / :func:`remove_boxed` / :func:`extract_boxed_answer` find the last
  ``\boxed{...}`` answer of a response (the raw string that majority votes compare);
* :func:`strip_string` is the reference normalisation and :func:`is_equiv_strict` compares two
  answers after it (falling back to raw equality when the normalisation raises);
* :func:`strict_score` is the 0/1 ground-truth reward.

No sympy and no math-verify are involved here; see :mod:`corewarding.grading.equivalence` for that.
Quirks of the reference are kept on purpose (e.g. ``"142.0"`` does not equal ``"142"``, ``\fbox``
answers are found but cannot be unwrapped, some malformed inputs raise ``IndexError``).
"""

from __future__ import annotations

import logging

logger = logging.getLogger(__name__)

__all__ = [
    "extract_boxed_answer",
    "extract_gsm8k_answer",
    "is_equiv_strict",
    "last_boxed_only_string",
    "remove_boxed",
    "strict_score",
    "strip_string",
]

_BOXED_SPACE = "\\boxed "
_BOXED_BRACE = "\\boxed{"


def last_boxed_only_string(text: str) -> str | None:
    r"""Return the last ``\boxed{...}`` (or ``\fbox{...}``) group of ``text``, or None.

    If ``text`` contains ``"\boxed "`` (with a space) the answer runs from the last such marker up
    to the next ``$``. Otherwise the last ``\boxed`` (failing that, the last ``\fbox``) is
    brace-matched up to its closing ``}``.

    >>> last_boxed_only_string(r"so $\boxed{\frac{1}{2}}$.")
    '\\boxed{\\frac{1}{2}}'
    >>> last_boxed_only_string(r"\boxed{1} then \boxed{2}")
    '\\boxed{2}'
    >>> last_boxed_only_string(r"$\boxed 5$ done")
    '\\boxed 5'
    >>> last_boxed_only_string("no box") is None
    True
    >>> last_boxed_only_string(r"\boxed{unbalanced") is None
    True
    """
    if _BOXED_SPACE in text:
        return _BOXED_SPACE + text.split(_BOXED_SPACE)[-1].split("$")[0]
    span = _last_braced_box(text)
    return text[span[0] : span[1] + 1] if span else None


def _last_braced_box(text: str) -> tuple[int, int] | None:
    r"""Where the last ``\boxed`` (failing that, the last ``\fbox``) starts, and its closing brace; None if there is
    none or its braces do not close."""
    start = text.rfind("\\boxed")
    if start < 0:
        start = text.rfind("\\fbox")
        if start < 0:
            return None
    close = _closing_brace(text, start)
    return (start, close) if close >= 0 else None


def _closing_brace(text: str, start: int) -> int:
    """The position of the "}" where the brace depth counted from ``start`` first returns to 0; -1 if none does.

    The reference walks character by character; the depth at each "}" is the depth at the previous one plus the "{"
    in between, less one, so jumping from "}" to "}" (str.find and str.count, in C) finds the same position.

    >>> _closing_brace("x{a{b}c}d}", 0), _closing_brace("}{{}}", 0), _closing_brace("{{}", 0)
    (7, 3, -1)
    """
    depth, pos = 0, start
    while (close := text.find("}", pos)) >= 0:
        depth += text.count("{", pos, close) - 1
        if depth == 0:
            return close
        pos = close + 1
    return -1


def remove_boxed(s: str) -> str:
    r"""Strip the ``\boxed `` prefix or the ``\boxed{...}`` wrapper of ``s``.

    Raises ValueError for anything else (the reference asserts), ``\fbox{...}`` included.

    >>> remove_boxed(r"\boxed{\frac{1}{2}}")
    '\\frac{1}{2}'
    >>> remove_boxed(r"\boxed 5")
    '5'
    >>> remove_boxed(r"\fbox{5}")
    Traceback (most recent call last):
    ...
    ValueError: not a \boxed{...} string: '\\fbox{5}'
    """
    if _BOXED_SPACE in s:
        if not s.startswith(_BOXED_SPACE):
            raise ValueError(f"not a \\boxed string: {s[:80]!r}")
        return s[len(_BOXED_SPACE) :]
    if not (s.startswith(_BOXED_BRACE) and s.endswith("}")):
        raise ValueError(f"not a \\boxed{{...}} string: {s[:80]!r}")
    return s[len(_BOXED_BRACE) : -1]


def extract_boxed_answer(text: str) -> str:
    r"""Return the content of the last ``\boxed{...}`` of ``text``; '' if there is none or it fails.

    This is the raw (unnormalised) string that majority votes compare.

    >>> extract_boxed_answer(r"The answer is $\boxed{\{1, 2\}}$.")
    '\\{1, 2\\}'
    >>> extract_boxed_answer(r"\fbox{3}")
    ''
    >>> extract_boxed_answer("42")
    ''
    """
    if _BOXED_SPACE not in text:  # the common case: last_boxed_only_string + remove_boxed without their copies
        span = _last_braced_box(text)
        if span is None or not text.startswith(_BOXED_BRACE, span[0]):  # an \fbox cannot be unwrapped: ''
            return ""
        return text[span[0] + len(_BOXED_BRACE) : span[1]]
    boxed = last_boxed_only_string(text)
    if boxed is None:
        return ""
    try:
        return remove_boxed(boxed)
    except ValueError:
        return ""


def _remove_right_units(s: str) -> str:
    r"""Drop a trailing ``\text{ unit}`` (the reference requires exactly one occurrence)."""
    if "\\text{ " in s:
        parts = s.split("\\text{ ")
        if len(parts) != 2:
            raise ValueError(f"more than one '\\text{{ ' in {s[:80]!r}")
        return parts[0]
    return s


def _fix_sqrt(s: str) -> str:
    r"""Turn ``\sqrt3`` into ``\sqrt{3}``; an empty piece after ``\sqrt`` raises IndexError."""
    if "\\sqrt" not in s:
        return s
    head, *pieces = s.split("\\sqrt")
    out = [head]
    for piece in pieces:
        if piece[0] != "{":
            out.append("\\sqrt{" + piece[0] + "}" + piece[1:])
        else:
            out.append("\\sqrt" + piece)
    return "".join(out)


def _fix_fracs(s: str) -> str:
    r"""Turn ``\frac12`` / ``\frac1{2}`` into ``\frac{1}{2}``.

    A one-character piece after ``\frac`` returns ``s`` unchanged; an empty one raises IndexError.
    """
    head, *pieces = s.split("\\frac")
    out = [head]
    for piece in pieces:
        out.append("\\frac")
        if piece[0] == "{":
            out.append(piece)
            continue
        if len(piece) < 2:
            return s
        a, b, rest = piece[0], piece[1], piece[2:]
        if b != "{":
            out.append("{" + a + "}{" + b + "}" + rest)
        else:
            out.append("{" + a + "}" + b + rest)
    return "".join(out)


def _fix_a_slash_b(s: str) -> str:
    r"""Turn an integer ratio ``a/b`` into ``\frac{a}{b}``."""
    parts = s.split("/")
    if len(parts) != 2:
        return s
    try:
        a, b = int(parts[0]), int(parts[1])
    except ValueError:
        return s
    if s != f"{a}/{b}":
        return s
    return "\\frac{" + str(a) + "}{" + str(b) + "}"


def strip_string(s: str) -> str:
    r"""Apply the reference (Hendrycks MATH) normalisation to an answer string.

    May raise (ValueError for several ``\text{ ``, IndexError for a dangling ``\sqrt``/``\frac``),
    like the reference; :func:`is_equiv_strict` then falls back to raw equality.

    >>> strip_string(r"\dfrac12")
    '\\frac{1}{2}'
    >>> strip_string("x = 5")
    '5'
    >>> strip_string(r"10\%")
    '10'
    >>> strip_string("0.5")
    '\\frac{1}{2}'
    >>> strip_string(r"\left( -\infty, 3 \right]")
    '(-\\infty,3]'
    """
    s = s.replace("\n", "")
    s = s.replace("\\!", "")
    s = s.replace("\\\\", "\\")
    s = s.replace("tfrac", "frac").replace("dfrac", "frac")
    s = s.replace("\\left", "").replace("\\right", "")
    s = s.replace("^{\\circ}", "").replace("^\\circ", "")
    s = s.replace("\\$", "")
    s = _remove_right_units(s)
    s = s.replace("\\\\%", "").replace("\\%", "")
    s = s.replace(" .", " 0.").replace("{.", "{0.")
    if not s:
        return s
    if s[0] == ".":
        s = "0" + s
    sides = s.split("=")
    if len(sides) == 2 and len(sides[0]) <= 2:
        s = sides[1]
    s = _fix_sqrt(s)
    s = s.replace(" ", "")
    s = _fix_fracs(s)
    if s == "0.5":
        s = "\\frac{1}{2}"
    return _fix_a_slash_b(s)


def is_equiv_strict(a: str | None, b: str | None) -> bool:
    r"""Reference equivalence: equal after :func:`strip_string` (raw equality if it raises).

    >>> is_equiv_strict("1/2", r"\frac{1}{2}")
    True
    >>> is_equiv_strict("142.0", "142")
    False
    >>> is_equiv_strict(None, None), is_equiv_strict("1", None)
    (True, False)
    """
    if a is None and b is None:
        logger.debug("is_equiv_strict called with two None values")
        return True
    if a is None or b is None:
        return False
    try:
        return strip_string(a) == strip_string(b)
    except Exception:
        return a == b


def strict_score(response: str, ground_truth: str | None) -> float:
    r"""Ground-truth reward of the reference: 1.0 if the last boxed answer matches, else 0.0.

    >>> strict_score(r"... so the answer is $\boxed{\dfrac{1}{2}}$.", "0.5")
    1.0
    >>> strict_score(r"$\boxed{142}$", "142.0")
    0.0
    >>> strict_score("no box here: 7", "7")
    0.0
    """
    if ground_truth is None:
        return 0.0
    try:
        boxed = last_boxed_only_string(response)
        if boxed is None:
            return 0.0
        answer = remove_boxed(boxed)
        return 1.0 if is_equiv_strict(answer, ground_truth) else 0.0
    except Exception as exc:
        logger.debug("strict_score failed: %r", exc)
        return 0.0


def extract_gsm8k_answer(solution: str) -> str:
    r"""Return the GSM8K final answer: the text after the last ``####``, stripped, without commas.

    >>> extract_gsm8k_answer("She makes 9 * 2 = $18.\n#### 1,018")
    '1018'
    """
    return solution.split("####")[-1].strip().replace(",", "")
