"""The errors of publishing: bad input (exit 2 at the command line) and a push the Hub refused or never answered."""

from __future__ import annotations


class PublishError(Exception):
    """Publishing failed; the message says why and names the path or the repo."""


class PublishInputError(PublishError):
    """Bad input: a missing run folder, checkpoint, step or data file, or one that cannot be read."""


class PushError(PublishError):
    """The Hub refused the push (4xx), kept failing (5xx, dropped connections) or cannot be reached."""
