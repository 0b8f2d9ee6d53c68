"""What the events say, folded into bounded memory: a time-bucketed series per cache domain.

Events are fed one decoded object at a time; only numbers are read (never prompt or output text).
Buckets share one grid whose width doubles whenever the span would exceed `max_buckets`, so memory
is bounded by the number of domains times `max_buckets`, whatever the length of the log. Requests
whose gateway did not know the cache domain wait (bounded) for their response, which names it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from schemas.timefmt import parse_ts


class BadField(ValueError):
    """A malformed event field, named without its value: a bad line can hold prompt text, and the
    report quotes its reasons for all readers."""

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(f"field {name}: {reason}")
        self.field, self.reason = name, reason


def _int(ev: dict[str, Any], name: str) -> int:
    value = ev[name]
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise BadField(name, "not an integer")
    try:
        return int(value)
    except (ValueError, OverflowError):  # "many", NaN, inf
        raise BadField(name, "not an integer") from None


def _ts(ev: dict[str, Any]) -> float:
    try:
        return parse_ts(ev["ts"])
    except ValueError:
        raise BadField("ts", "not a time (RFC 3339 with offset or epoch seconds, years 1970..9999)") from None


@dataclass(slots=True)
class Bucket:
    requests: int = 0
    max_prompt: int = 0
    overlong: int = 0  # prompts larger than the prefill capacity known at the time
    overlong_accepted: int = 0  # ... of which the response was 2xx: the incident's fault path
    max_accepted_overlong: int = 0
    max_used_share: float = -1.0  # -1: no cache_stats in this bucket
    capacity: int | None = None  # the last prefill capacity reported in the bucket
    alerts: Counter[str] = field(default_factory=Counter)  # by severity

    def merge(self, other: Bucket) -> None:
        self.requests += other.requests
        self.max_prompt = max(self.max_prompt, other.max_prompt)
        self.overlong += other.overlong
        self.overlong_accepted += other.overlong_accepted
        self.max_accepted_overlong = max(self.max_accepted_overlong, other.max_accepted_overlong)
        self.max_used_share = max(self.max_used_share, other.max_used_share)
        self.capacity = other.capacity if other.capacity is not None else self.capacity
        self.alerts.update(other.alerts)


@dataclass(slots=True)
class Seen:
    """What the events said about one watched (affected) request."""

    request_ts: float | None = None
    prompt_tokens: int | None = None
    status: int | None = None


@dataclass
class DomainSeries:
    name: str
    buckets: dict[int, Bucket] = field(default_factory=dict)
    capacity: int | None = None  # latest prefill (or unified) pool size
    context_window: int | None = None
    requests: int = 0
    overlong: int = 0
    overlong_accepted: int = 0


class Timeline:
    def __init__(
        self, watch: set[str], *, max_buckets: int = 600, min_width_s: float = 1.0, max_pending: int = 200_000
    ):
        self.max_buckets = max_buckets
        self.width = min_width_s
        self.origin: float | None = None
        self.domains: dict[str, DomainSeries] = {}
        self.watch = watch
        self.requests: dict[str, Seen] = {}
        self.tenants: set[str] = set()
        self._pending: dict[str, tuple[float, int]] = {}  # request_id -> (ts, prompt_tokens), domain unknown yet
        self._overlong: dict[str, tuple[str, float, int]] = {}  # request_id -> (domain, ts, tokens): status to come
        self.max_pending = max_pending
        self.counters: Counter[str] = Counter()
        self._lo: int | None = None
        self._hi: int | None = None

    # -- the grid ----------------------------------------------------------------------------------
    def _index(self, ts: float) -> int:
        if self.origin is None:
            self.origin = ts
        idx = int((ts - self.origin) // self.width)
        if self._lo is None or self._hi is None:
            self._lo = self._hi = idx
        self._lo, self._hi = min(self._lo, idx), max(self._hi, idx)
        while self._hi - self._lo >= self.max_buckets:
            self._coarsen()
            idx //= 2
        return idx

    def _coarsen(self) -> None:
        assert self._lo is not None and self._hi is not None
        self.width *= 2
        self._lo //= 2
        self._hi //= 2
        for series in self.domains.values():
            merged: dict[int, Bucket] = {}
            for idx, b in sorted(series.buckets.items()):
                into = merged.get(idx // 2)
                if into is None:
                    merged[idx // 2] = b
                else:
                    into.merge(b)
            series.buckets = merged

    def _bucket(self, domain: str, ts: float) -> tuple[DomainSeries, Bucket]:
        series = self.domains.get(domain)
        if series is None:
            series = self.domains[domain] = DomainSeries(domain)
        idx = self._index(ts)
        b = series.buckets.get(idx)
        if b is None:
            b = series.buckets[idx] = Bucket()
        return series, b

    def bucket_start(self, idx: int) -> float:
        return (self.origin or 0.0) + idx * self.width

    # -- feeding -----------------------------------------------------------------------------------
    def _add_prompt(self, rid: str, domain: str, ts: float, tokens: int, status: int | None) -> None:
        series, b = self._bucket(domain, ts)
        b.requests += 1
        series.requests += 1
        b.max_prompt = max(b.max_prompt, tokens)
        if series.capacity is not None and tokens > series.capacity:
            b.overlong += 1
            series.overlong += 1
            if status is not None:
                self._answered_overlong(domain, ts, tokens, status)
            else:
                if len(self._overlong) >= self.max_pending:
                    self._overlong.pop(next(iter(self._overlong)))
                    self.counters["overlong_without_response"] += 1
                self._overlong[rid] = (domain, ts, tokens)

    def _answered_overlong(self, domain: str, ts: float, tokens: int, status: int) -> None:
        if 200 <= status < 300:
            series, b = self._bucket(domain, ts)
            b.overlong_accepted += 1
            series.overlong_accepted += 1
            b.max_accepted_overlong = max(b.max_accepted_overlong, tokens)

    def feed(self, ev: dict[str, Any]) -> None:
        """One decoded event. Raises (KeyError, TypeError, ValueError) on a malformed one; the caller counts it."""
        kind = ev["type"]
        ts = _ts(ev)
        if kind == "request":
            rid, tokens = str(ev["request_id"]), _int(ev, "prompt_tokens")
            self.tenants.add(str(ev["tenant_id"]))
            if rid in self.watch:
                seen = self.requests.setdefault(rid, Seen())
                seen.request_ts, seen.prompt_tokens = ts, tokens
            domain = ev.get("cache_domain")
            if domain:
                self._add_prompt(rid, str(domain), ts, tokens, None)
                if ev.get("context_window"):
                    self.domains[str(domain)].context_window = _int(ev, "context_window")
            else:
                if len(self._pending) >= self.max_pending:
                    self._pending.pop(next(iter(self._pending)))  # the oldest: its response is long overdue
                    self.counters["requests_without_domain_unplaced"] += 1
                self._pending[rid] = (ts, tokens)
        elif kind == "response":
            rid = str(ev["request_id"])
            self.tenants.add(str(ev["tenant_id"]))
            status = _int(ev, "status_code")
            if rid in self.watch:
                self.requests.setdefault(rid, Seen()).status = status
            pending = self._pending.pop(rid, None)
            if pending is not None:
                self._add_prompt(rid, str(ev["cache_domain"]), *pending, status)
            over = self._overlong.pop(rid, None)
            if over is not None:
                self._answered_overlong(*over, status)
        elif kind == "cache_stats":
            if ev["role"] == "decode":
                self.counters["cache_stats_decode_not_plotted"] += 1
                return  # the prefill pool is the one whose overflow the incident was about
            capacity, used = _int(ev, "capacity_tokens"), _int(ev, "used_tokens")
            series, b = self._bucket(str(ev["cache_domain"]), ts)
            series.capacity = b.capacity = capacity
            if ev.get("context_window"):
                series.context_window = _int(ev, "context_window")
            if capacity > 0:
                b.max_used_share = max(b.max_used_share, used / capacity)
        elif kind == "canary":
            pass
        else:
            raise BadField("type", "unknown event type")
        self.counters[kind] += 1

    def add_alert(self, domain: str, ts: float, severity: str) -> None:
        _, b = self._bucket(domain, ts)
        b.alerts[severity] += 1

    def finish(self) -> None:
        """Requests still waiting for a response that names their domain are counted, not guessed."""
        self.counters["requests_without_domain_unplaced"] += len(self._pending)
        self._pending.clear()
        self.counters["overlong_without_response"] += len(self._overlong)
        self._overlong.clear()
