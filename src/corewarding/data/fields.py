"""Turn one source record into a verl row: which columns hold the question and the answer, and how to read them."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from corewarding.files import SourceError
from corewarding.grading.answers import extract_gsm8k_answer, last_boxed_only_string, remove_boxed
from corewarding.rows import get_path
from corewarding.schemas import DatasourceConfig


def _last_boxed(value: Any) -> str | None:
    boxed = last_boxed_only_string(str(value))
    if boxed is None:
        return None
    try:
        return remove_boxed(boxed)
    except ValueError:  # \fbox{...} and other forms the reference cannot unwrap
        return None


def _after_hashes(value: Any) -> str | None:
    text = str(value)
    return extract_gsm8k_answer(text) if "####" in text else None


def _as_given(value: Any) -> str | None:
    return str(value)


def _items(value: Any) -> str | None:
    items = [str(v) for v in value] if isinstance(value, (list, tuple)) or hasattr(value, "tolist") else [str(value)]
    return ", ".join(items) if items else None


# How a ground truth is read from its column (methods.md section 3; the list per source).
ANSWER_RULES: dict[str, Callable[[Any], str | None]] = {
    "last_boxed": _last_boxed,  # MATH: the solution's last \boxed{...}
    "after_hashes": _after_hashes,  # GSM8K: the text after "####", without thousands commas
    "as_given": _as_given,  # AMC/AIME and ready answers: the raw string, comparing is the checker's job
    "items": _items,  # OlympiadBench: a list of final answers, joined with ", "
}


def _is_missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and value != value)


def _user_message(messages: Sequence[Any]) -> Any:
    for message in messages:
        if isinstance(message, Mapping) and message.get("role") == "user":
            return message.get("content")
    raise ValueError("a message list without a user message")


@dataclass(frozen=True)
class FieldSpec:
    """Where a datasource keeps its question, answer and the extra columns to carry over."""

    question: tuple[str, ...]
    answer: tuple[tuple[str, str], ...]  # (column, rule) candidates, first present wins
    top_level: tuple[str, ...] = ()
    extra_info: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_config(cls, spec: DatasourceConfig) -> FieldSpec:
        """Build from a typed ``datasource`` section; an unknown answer rule is an error naming it."""
        for item in spec.answer:
            if item.rule not in ANSWER_RULES:
                raise SourceError(f"datasource.answer rule {item.rule!r}: expected one of {', '.join(ANSWER_RULES)}")
        return cls(
            question=spec.question,
            answer=tuple((item.column, item.rule) for item in spec.answer),
            top_level=spec.top_level,
            extra_info=dict(spec.extra_info),
        )

    def resolve(self, columns: Sequence[str], source: str) -> tuple[str, tuple[str, str]]:
        """The question column and (answer column, rule) present in ``columns``; an error names what is missing."""
        present = set(columns)
        question = next((q for q in self.question if q.split(".")[0] in present), None)
        if question is None:
            raise SourceError(f"{source}: missing question column (one of {', '.join(self.question)})")
        answer = next((a for a in self.answer if a[0].split(".")[0] in present), None)
        if answer is None:
            names = ", ".join(a[0] for a in self.answer)
            raise SourceError(f"{source}: missing answer column (one of {names})")
        missing = [c for c in (*self.top_level, *self.extra_info.values()) if c.split(".")[0] not in present]
        if missing:
            raise SourceError(f"{source}: missing column(s) {', '.join(missing)}")
        return question, answer


def read_question(record: Mapping[str, Any], column: str, where: str) -> str | None:
    """The question text of a record (a string, or the user message of a message list); None when missing."""
    value = get_path(record, column)
    if _is_missing(value):
        return None
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        try:
            value = _user_message(value)
        except ValueError as exc:
            raise SourceError(f"{where}, column {column}: {exc}") from exc
    if not isinstance(value, str):
        raise SourceError(f"{where}, column {column}: expected text, got {type(value).__name__}")
    return value


def read_answer(record: Mapping[str, Any], column: str, rule: str, where: str) -> str | None:
    """The ground truth of a record under ``rule``; None when missing or not extractable."""
    value = get_path(record, column)
    if _is_missing(value):
        return None
    if isinstance(value, (Mapping, bytes)):
        raise SourceError(f"{where}, column {column}: expected an answer, got {type(value).__name__}")
    return ANSWER_RULES[rule](value)
