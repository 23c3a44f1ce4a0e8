"""Preloaded by the forkserver of the math-verify workers: imports math-verify and warms its parser caches once,
so that every worker forked from it (including the replacement of a killed one) starts warm in milliseconds."""

from corewarding.grading.math_verify_worker import warm_up

warm_up()
