"""The wire contract of crosstalk: events in, alerts out (pydantic v2 models)."""

from schemas.alert import Alert, Severity, Signal, AlertKind, SEVERITY_RANK
from schemas.events import (
    CacheStats,
    Canary,
    Event,
    EventError,
    Fingerprint,
    Request,
    Response,
    Usage,
    parse_event,
    parse_event_obj,
)
from schemas.timefmt import format_ts, parse_ts

__all__ = [
    "Alert",
    "AlertKind",
    "CacheStats",
    "Canary",
    "Event",
    "EventError",
    "Fingerprint",
    "Request",
    "Response",
    "SEVERITY_RANK",
    "Severity",
    "Signal",
    "Usage",
    "format_ts",
    "parse_event",
    "parse_event_obj",
    "parse_ts",
]
