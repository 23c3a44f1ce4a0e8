"""A tiny deterministic arithmetic data set in the verl row format, for CPU tests.

Every train question has an aligned rephrasing (same numbers, same answer, a small real-world scenario),
mirroring the ``train`` / ``train_rewrite`` pair of the Co-rewarding data.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from corewarding.files import write_parquet_atomic
from corewarding.rows import make_row

logger = logging.getLogger(__name__)

OPERATIONS: tuple[str, ...] = ("+", "-", "*")

# Plain questions, per operation.
QUESTION_TEMPLATES: dict[str, tuple[str, ...]] = {
    "+": (
        "What is {a} + {b}?",
        "Compute {a} + {b}.",
        "Calculate {a} plus {b}.",
        "Find the sum of {a} and {b}.",
    ),
    "-": (
        "What is {a} - {b}?",
        "Compute {a} - {b}.",
        "Calculate {a} minus {b}.",
        "Subtract {b} from {a}.",
    ),
    "*": (
        "What is {a} * {b}?",
        "Compute {a} \\times {b}.",
        "Calculate {a} times {b}.",
        "Find the product of {a} and {b}.",
    ),
}

# Word-problem rephrasings, per operation: same numbers, same answer.
REPHRASE_TEMPLATES: dict[str, tuple[str, ...]] = {
    "+": (
        "{name} has {a} {obj} and finds {b} more. How many {obj} does {name} have now?",
        "There are {a} {obj} in a box and {name} puts in {b} more. How many {obj} are in the box?",
        "{name} collected {a} {obj} on Monday and {b} {obj} on Tuesday. How many {obj} did {name} collect in total?",
    ),
    "-": (
        "{name} has {a} {obj} and gives {b} of them away. How many {obj} does {name} have left?",
        "A shelf holds {a} {obj}. {name} takes {b} of them. How many {obj} remain on the shelf?",
        "{name} had {a} {obj} and lost {b}. How many {obj} does {name} still have?",
    ),
    "*": (
        "{name} has {a} bags with {b} {obj} in each bag. How many {obj} does {name} have in total?",
        "A garden has {a} rows of {obj} with {b} {obj} in each row. How many {obj} are in the garden?",
        "{name} buys {a} packs of {obj}, and each pack holds {b}. How many {obj} does {name} buy?",
    ),
}

NAMES: tuple[str, ...] = ("Mia", "Leo", "Ava", "Noah", "Zoe", "Omar", "Lina", "Sam")
OBJECTS: dict[str, tuple[str, ...]] = {
    "+": ("marbles", "stickers", "apples", "shells", "coins"),
    "-": ("marbles", "stickers", "apples", "books", "cookies"),
    "*": ("apples", "candies", "tulips", "pencils", "buttons"),
}


@dataclass(frozen=True)
class TinyProblem:
    """One arithmetic problem ``a op b``."""

    op: str
    a: int
    b: int

    @property
    def answer(self) -> int:
        """The exact integer result."""
        if self.op == "+":
            return self.a + self.b
        if self.op == "-":
            return self.a - self.b
        return self.a * self.b

    @property
    def expression(self) -> str:
        """The problem as text, e.g. ``"3 + 4"``."""
        return f"{self.a} {self.op} {self.b}"

    @property
    def solution(self) -> str:
        """A short worked answer, e.g. ``"3 + 4 = 7. The answer is \\boxed{7}."``."""
        return f"{self.expression} = {self.answer}. The answer is \\boxed{{{self.answer}}}."

    def key(self) -> tuple[str, int, int]:
        """Identity used for de-duplication (commutative operations are order-free)."""
        if self.op in ("+", "*"):
            return (self.op, min(self.a, self.b), max(self.a, self.b))
        return (self.op, self.a, self.b)


@dataclass(frozen=True)
class TinyDataset:
    """Aligned tiny splits; ``train_rephrased[i]`` rephrases ``train[i]``."""

    train: list[dict]
    train_rephrased: list[dict]
    test: list[dict]
    train_problems: list[TinyProblem] = field(default_factory=list)
    test_problems: list[TinyProblem] = field(default_factory=list)


def _sample_problem(rng: random.Random) -> TinyProblem:
    """Draw one problem with single- or two-digit operands and a non-negative answer."""
    op = rng.choice(OPERATIONS)
    if op == "+":
        return TinyProblem(op, rng.randint(1, 30), rng.randint(1, 30))
    if op == "-":
        a = rng.randint(2, 40)
        return TinyProblem(op, a, rng.randint(1, a - 1))
    return TinyProblem(op, rng.randint(2, 9), rng.randint(2, 12))


def _question(problem: TinyProblem, rng: random.Random) -> str:
    return rng.choice(QUESTION_TEMPLATES[problem.op]).format(a=problem.a, b=problem.b)


def _rephrasing(problem: TinyProblem, rng: random.Random) -> str:
    template = rng.choice(REPHRASE_TEMPLATES[problem.op])
    return template.format(a=problem.a, b=problem.b, name=rng.choice(NAMES), obj=rng.choice(OBJECTS[problem.op]))


def make_tiny_dataset(n_train: int = 64, n_test: int = 16, seed: int = 0) -> TinyDataset:
    """Generate ``n_train`` aligned train/rephrased rows and ``n_test`` disjoint test rows (deterministic)."""
    if n_train < 0 or n_test < 0:
        raise ValueError("n_train and n_test must be non-negative")
    rng = random.Random(seed)
    total = n_train + n_test
    problems: list[TinyProblem] = []
    seen: set[tuple[str, int, int]] = set()
    attempts = 0
    while len(problems) < total:
        attempts += 1
        if attempts > 100 * total + 1000:
            raise ValueError(f"cannot draw {total} distinct tiny problems")
        problem = _sample_problem(rng)
        if problem.key() in seen:
            continue
        seen.add(problem.key())
        problems.append(problem)
    train_problems, test_problems = problems[:n_train], problems[n_train:]
    train = [make_row(_question(p, rng), str(p.answer), i, "train") for i, p in enumerate(train_problems)]
    rephrased = [make_row(_rephrasing(p, rng), str(p.answer), i, "train") for i, p in enumerate(train_problems)]
    test = [make_row(_question(p, rng), str(p.answer), i, "test") for i, p in enumerate(test_problems)]
    return TinyDataset(train, rephrased, test, train_problems, test_problems)


def write_tiny_dataset(out_dir: Path, **kwargs: Any) -> dict[str, Path]:
    """Write ``train``, ``train_rephrased`` and ``test`` parquet files; kwargs go to ``make_tiny_dataset``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    dataset = make_tiny_dataset(**kwargs)
    paths: dict[str, Path] = {}
    for name in ("train", "train_rephrased", "test"):
        path = out_dir / f"{name}.parquet"
        write_parquet_atomic(getattr(dataset, name), path)
        paths[name] = path
    logger.info("wrote tiny dataset (%d train, %d test rows) to %s", len(dataset.train), len(dataset.test), out_dir)
    return paths
