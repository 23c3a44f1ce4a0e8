"""The one base of the errors a user can act on from their message alone (a bad config value, a malformed input file,
a busy run or store, a refused pool key): the command line prints such an error as one ``error: ...`` line and exits 2
instead of showing a traceback. No imports, so the command line's start-up can catch it without loading anything."""

from __future__ import annotations


class ExpectedError(Exception):
    """An error whose message says what is wrong and what to fix. Each error class that is one line on the command
    line derives from it beside its usual base, e.g. ``class ConfigError(ExpectedError, ValueError)``."""
