"""The ``corewarding`` command: ``main`` builds the parser from one module per command group."""

from corewarding.cli.main import main

__all__ = ["main"]
