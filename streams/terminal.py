"""The operator's terminal: the one stderr console that commands write their messages, progress and tables to.

One console, so that a progress bar and the lines printed meanwhile share it (rich redraws around them).
"""

from __future__ import annotations

from rich.console import Console

err = Console(stderr=True, highlight=False)
if not err.is_terminal:
    err.width = 160  # logs and CI: wide enough that tables keep one row per line
