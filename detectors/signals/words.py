"""How a signal's figures read in words: the number formats every signal's declared words share.

A signal says what it found where it is registered (`Raises.summary`, `Raises.report`, detectors/signals/base.py):
the alert's one-line summary (detectors/domain.py) and the incident report (streams/report/words.py) read those words
from the registry, so a new signal brings its own and no list elsewhere names it.
"""

from __future__ import annotations

from typing import Any


def n(value: Any) -> str:
    """A count with thousands separators; a large float rounded, a small one to 3 significant digits."""
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"
    return str(value)


def pct(value: Any) -> str:
    """A share (0..1) as a whole percentage."""
    try:
        return f"{float(value) * 100:.0f} %"
    except (TypeError, ValueError):
        return str(value)
