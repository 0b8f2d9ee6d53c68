"""Event time on the wire: RFC 3339 with an offset, or epoch seconds. Inside: float epoch seconds.

Accepted event times lie in years 1970..9999 UTC, so that every accepted time can be formatted
(Python's datetime ends at year 9999) and no later stage can fail on one.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

MIN_TS = 0.0
MAX_TS = 253402300799.999  # 9999-12-31T23:59:59.999Z


def parse_ts(value: object) -> float:
    """Return epoch seconds; raise ValueError with a reason a producer can act on."""
    if isinstance(value, bool):
        raise ValueError("ts must be RFC 3339 with offset or epoch seconds, not a boolean")
    if isinstance(value, (int, float)):
        try:
            ts = float(value)
        except OverflowError:  # an integer of hundreds of digits
            raise ValueError("ts out of range: years 1970..9999 UTC") from None
    elif isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError as exc:
            raise ValueError(f"ts is not RFC 3339: {value[:64]!r}") from exc
        if parsed.tzinfo is None:
            # A naive timestamp is ambiguous across gateways in different zones.
            raise ValueError(f"ts has no UTC offset: {value[:64]!r}")
        try:
            ts = parsed.timestamp()
        except (OverflowError, ValueError):
            raise ValueError("ts out of range: years 1970..9999 UTC") from None
    else:
        raise ValueError("ts must be RFC 3339 with offset or epoch seconds")
    if not math.isfinite(ts) or not MIN_TS <= ts <= MAX_TS:
        raise ValueError(f"ts out of range: years 1970..9999 UTC, got {str(value)[:64]}")
    return ts


def format_ts(ts: float) -> str:
    """RFC 3339 in UTC with millisecond precision, e.g. 2026-08-27T10:00:00.123Z. Never raises:
    a time outside the representable range (only reachable by bypassing validation) is clamped."""
    if not math.isfinite(ts) or ts < MIN_TS:
        ts = MIN_TS
    elif ts > MAX_TS:
        ts = MAX_TS
    dt = datetime.fromtimestamp(ts, tz=UTC)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"
