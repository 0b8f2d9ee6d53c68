"""Event time on the wire: RFC 3339 with an offset, or epoch seconds. Inside: float epoch seconds."""

from __future__ import annotations

import math
from datetime import UTC, datetime


def parse_ts(value: object) -> float:
    """Return epoch seconds; raise ValueError with a reason a producer can act on."""
    if isinstance(value, bool):
        raise ValueError("ts must be RFC 3339 with offset or epoch seconds, not a boolean")
    if isinstance(value, (int, float)):
        ts = float(value)
    elif isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError as exc:
            raise ValueError(f"ts is not RFC 3339: {value!r}") from exc
        if parsed.tzinfo is None:
            # A naive timestamp is ambiguous across gateways in different zones.
            raise ValueError(f"ts has no UTC offset: {value!r}")
        ts = parsed.timestamp()
    else:
        raise ValueError("ts must be RFC 3339 with offset or epoch seconds")
    if not math.isfinite(ts) or ts < 0:
        raise ValueError(f"ts out of range: {value!r}")
    return ts


def format_ts(ts: float) -> str:
    """RFC 3339 in UTC with millisecond precision, e.g. 2026-08-27T10:00:00.123Z."""
    dt = datetime.fromtimestamp(ts, tz=UTC)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"
