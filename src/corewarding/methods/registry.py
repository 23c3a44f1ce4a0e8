"""Method registry: ``register(name)`` refuses duplicates; ``get(name)`` lists the known names on a miss."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from corewarding.methods.base import Rollout, ScoreResult, TextScorer
from corewarding.methods.logits_statistics import logits_statistic

if TYPE_CHECKING:  # the registry and the text methods never load torch
    import torch

    from corewarding.methods.voting import Voter

ViewMetrics = Callable[[Sequence[Rollout], ScoreResult, "Voter"], dict[str, float | None]]


@dataclass(frozen=True)
class MethodSpec:
    """How a reward method plugs into a trainer.

    ``kind`` is ``text`` (rewards from extracted answers: ``score``) or ``logits`` (rewards from the old policy's
    per-token logits statistics: ``sequence_reward``, fed the registered statistic named by ``logits_statistic``,
    see ``methods.logits_statistics``). ``views`` are the rollout views the method reads;
    ``rewarded_views`` are those it trains on. ``complete_views``: every uid must have rollouts of every view (a
    rescored dump lacking one is an error). ``view_metrics`` adds per-view label metrics to a step's metrics.
    """

    name: str
    kind: Literal["text", "logits"]
    views: tuple[str, ...]
    rewarded_views: tuple[str, ...]
    score: TextScorer | None = None
    sequence_reward: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None
    logits_statistic: str | None = None  # the registered logits statistic a logits method's reward reads
    needs_ground_truth: bool = False
    needs_teacher: bool = False
    complete_views: bool = False
    view_metrics: ViewMetrics | None = None
    reward_unit: str = "0/1"  # what its mean reward counts (a key of REWARD_UNITS): tables and charts label it

    @property
    def question_views(self) -> tuple[str, ...]:
        """The views of the question the policy samples (``views`` less the teacher's rollouts): what the method's
        YAML must list as ``method.views``."""
        return tuple(v for v in self.views if v != "teacher" and not v.startswith("teacher_"))

    @property
    def logits_statistics(self) -> tuple[str, ...]:
        """The logits statistics the trainers compute for this method (each backend loops over these)."""
        return (self.logits_statistic,) if self.logits_statistic is not None else ()


_REGISTRY: dict[str, MethodSpec] = {}
# Each reward unit and what it means, for a table's footnote or a column's help (a method's ``reward_unit``).
REWARD_UNITS = {"0/1": "answers agreeing with the label", "nats": "self-certainty", "-nats": "negative entropy"}


def register(spec: MethodSpec) -> MethodSpec:
    """Add a method; a second registration under the same name is an error."""
    if spec.name in _REGISTRY:
        raise ValueError(f"method {spec.name!r} is already registered")
    if spec.kind == "logits" and (spec.sequence_reward is None or spec.logits_statistic is None):
        raise ValueError(f"logits method {spec.name!r} needs a sequence_reward and a logits_statistic")
    for name in spec.logits_statistics:
        logits_statistic(name)  # an unknown statistic is an error here, not at the first training step
    _REGISTRY[spec.name] = spec
    return spec


def reward_unit(method: str) -> str:
    """What ``method``'s mean reward counts (``0/1``, ``nats``, ``-nats``); a variant of a method
    (``majority_voting_rephrased``) takes the method's, an unknown name ``?``.

    >>> reward_unit("gt_grpo"), reward_unit("entropy"), reward_unit("majority_voting_rephrased"), reward_unit("x")
    ('0/1', '-nats', '0/1', '?')
    """
    known = [m for m in _REGISTRY if method == m or method.startswith(m + "_")]
    return _REGISTRY[max(known, key=len)].reward_unit if known else "?"


def get(name: str) -> MethodSpec:
    """The registered method ``name``."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown method {name!r}; known: {', '.join(sorted(_REGISTRY))}") from None


def names() -> list[str]:
    return sorted(_REGISTRY)
