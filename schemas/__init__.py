"""The wire contract of crosstalk: events in, alerts out (pydantic v2 models)."""

from schemas.alert import SEVERITY_RANK, Alert, AlertKind, Severity, Signal
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
    "SEVERITY_RANK",
    "Alert",
    "AlertKind",
    "CacheStats",
    "Canary",
    "Event",
    "EventError",
    "Fingerprint",
    "Request",
    "Response",
    "Severity",
    "Signal",
    "Usage",
    "format_ts",
    "parse_event",
    "parse_event_obj",
    "parse_ts",
]
