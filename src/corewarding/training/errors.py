"""Why a training run cannot start or stopped early, as named errors the CLI turns into one line (no heavy imports)."""

from __future__ import annotations

# Defined beside the manifest check, so readers (evaluation, publishing) raise it without importing training.
from corewarding.checkpoint_manifest import CheckpointError
from corewarding.errors import ExpectedError


class LegacyCheckpointError(CheckpointError):
    """A checkpoint in the old pickle format (``trainer.pt``): loading it could run code, so it is never loaded."""


class CheckpointSaveError(CheckpointError):
    """A checkpoint could not be written (a full disk, a file-size limit); its temporary files were removed."""


class RunWriteError(ExpectedError, RuntimeError):
    """A run file could not be written (a full disk, a file-size limit); what it held before is kept."""


class RunInUseError(ExpectedError, RuntimeError):
    """Another process holds the run folder's lock (another trainer is writing it)."""


class TrainingInterrupted(KeyboardInterrupt):
    """Ctrl-C (or a signal turned into KeyboardInterrupt) stopped training; the run can resume from ``saved_step``.

    Still a KeyboardInterrupt, so callers that unwind on one (the pipeline) keep doing so."""

    def __init__(self, step: int, saved_step: int) -> None:
        super().__init__(f"interrupted at step {step}; run the same command to resume from step {saved_step}")
        self.step, self.saved_step = step, saved_step
