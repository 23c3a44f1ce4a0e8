"""Why a training run cannot start, as named errors the CLI turns into one line (kept free of heavy imports)."""

from __future__ import annotations


class CheckpointError(RuntimeError):
    """The run folder has checkpoints but none is complete and readable, so it can be neither resumed nor restarted
    without losing them."""


class RunInUseError(RuntimeError):
    """Another process holds the run folder's lock (another trainer is writing it)."""
