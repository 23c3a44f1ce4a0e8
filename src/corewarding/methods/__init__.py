"""Reward methods: importing this package registers every built-in method (``names()`` lists them; a method
registered from outside, e.g. a test's, joins them with ``register``)."""

from corewarding.methods import (  # noqa: F401  (imported to register)
    co_rewarding_1,
    co_rewarding_2,
    co_rewarding_3,
    entropy,
    gt_grpo,
    majority_voting,
    self_certainty,
)
from corewarding.methods.base import Rollout, Scored, ScoreResult
from corewarding.methods.registry import REWARD_UNITS, MethodSpec, get, names, register, reward_unit
from corewarding.methods.voting import Voter

__all__ = ["REWARD_UNITS", "MethodSpec", "Rollout", "ScoreResult", "Scored", "Voter"]
__all__ += ["get", "names", "register", "reward_unit"]
