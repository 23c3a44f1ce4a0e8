"""Each warning once per process: a model or dataset loaded several times (evaluate's steps, the demo's cells) makes
the Hub libraries and our loaders repeat the same offline/dtype warning; the first copy says all there is to say."""

from __future__ import annotations

import logging
import warnings

# Libraries that keep their own handlers (propagate off): their handlers get the filter too.
LIBRARY_LOGGERS = ("transformers", "huggingface_hub", "datasets")


class OnceFilter(logging.Filter):
    """Pass a WARNING (or higher) record the first time its logger and text are seen; lower levels always pass."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: set[tuple[str, int, str]] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        key = (record.name, record.levelno, record.getMessage())
        if key in self.seen:
            return False
        self.seen.add(key)
        return True


def install() -> int:
    """Give the root handlers and the libraries' own a filter each (idempotent); show each Python warning once.

    One filter per handler: a shared one would drop a record at the second handler it passes through. Returns how many
    handlers got one.
    """
    handlers = list(logging.getLogger().handlers)
    for name in LIBRARY_LOGGERS:
        handlers += logging.getLogger(name).handlers
    added = 0
    for handler in handlers:
        if not any(isinstance(f, OnceFilter) for f in handler.filters):
            handler.addFilter(OnceFilter())
            added += 1
    warnings.simplefilter("once")  # e.g. huggingface_hub's UserWarnings, repeated per call otherwise
    # Ray's notice that verl imports its state API from ray.experimental: nothing a user can act on, and it made a
    # one-line refusal (e.g. the verl dry run's memory plan) three lines long.
    warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"ray(\.|$)")
    return added
