"""The `crosstalk` command line."""

from streams.cli.main import main

__all__ = ["main"]
