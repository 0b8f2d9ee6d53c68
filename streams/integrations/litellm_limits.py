"""The LiteLLM guard's limits: each cache domain's current prefill capacity, from `crosstalk scrape`'s GET
/limits and/or its compacted limits topic, kept fresh off the request path.

A background thread re-reads /limits every `limits_refresh_s`, each read bounded in time and size, so a slow
or dripping /limits server delays the refresh and never a request (issue 25: a slow /limits held the
refresh lock and every request waited behind it). Requests read the last known limits. A record that is
not a limit (a string or null `ts`, a capacity that is not a positive number) or that lies in the future
is rejected with a log line and a counter, never kept: a future `ts` would otherwise win over every later
record until a restart.

Counters go to prometheus_client's default registry (LiteLLM's /metrics serves it when its prometheus
callback is on; an SDK user can serve it with prometheus_client.start_http_server):
    crosstalk_guard_decisions_total{decision}     passed | rejected | no_limit | stale | unmapped
    crosstalk_guard_limit_records_total{outcome}  http | kafka | bad_record | future_ts | fetch_error | fetch_timeout
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
from collections import Counter
from typing import Any

import httpx
import orjson
from prometheus_client import REGISTRY
from prometheus_client import Counter as PromCounter

from streams.redact import redact_text, redact_url
from streams.settings import LiteLLMSettings, Settings

log = logging.getLogger("crosstalk.litellm")

MAX_LIMITS_BYTES = 1 << 20  # /limits of thousands of domains is a few hundred KB


class _Deadline(TimeoutError):
    """The whole /limits read outlasted limits_timeout_s."""


def _metric(name: str, doc: str, label: str) -> PromCounter:
    # One per process, whatever number of loggers (tests build many): reuse what is registered.
    existing = REGISTRY._names_to_collectors.get(name)
    if isinstance(existing, PromCounter):
        return existing
    return PromCounter(name.removesuffix("_total"), doc, [label])


DECISIONS = _metric("crosstalk_guard_decisions_total", "crosstalk guard decisions per request", "decision")
RECORDS = _metric("crosstalk_guard_limit_records_total", "limit records read by the crosstalk guard", "outcome")


def check_limit(rec: Any, now: float, max_future_s: float) -> str | None:
    """Why `rec` is not a usable limit record, or None."""
    if not isinstance(rec, dict):
        return "not an object"
    ts = rec.get("ts")
    if isinstance(ts, bool) or not isinstance(ts, int | float) or not math.isfinite(ts):
        return f"ts {ts!r} is not a number"
    if ts > now + max_future_s:
        return f"ts {ts!r} is {ts - now:.0f} s in the future"
    cap = rec.get("prefill_capacity_tokens")
    if isinstance(cap, bool) or not isinstance(cap, int | float) or not math.isfinite(cap) or cap < 1:
        return f"prefill_capacity_tokens {cap!r} is not a positive number"
    if cap > 1e15:
        return f"prefill_capacity_tokens {cap!r} is beyond any pool"
    return None


class LimitsClient:
    """Current prefill capacities by cache domain, with their age; reads never wait for the network."""

    def __init__(self, settings: Settings) -> None:
        self.s: LiteLLMSettings = settings.litellm
        self.settings = settings
        self._limits: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()  # guards _limits between the pollers and the requests; held for dict ops
        self.counters: Counter[str] = Counter()
        self._stop = threading.Event()
        self._first = threading.Event()  # the first /limits read is over (either way)
        self._threads: list[threading.Thread] = []
        self._warned: dict[str, float] = {}
        self._polling = False
        if self.s.limits_url is None:
            self._first.set()
        if self.s.limits_from_kafka:
            self._start(self._kafka_loop, "crosstalk-limits-kafka")

    def _start(self, target: Any, name: str) -> None:
        t = threading.Thread(target=target, name=name, daemon=True)
        t.start()
        self._threads.append(t)

    def _count(self, outcome: str) -> None:
        self.counters[f"limits.{outcome}"] += 1
        RECORDS.labels(outcome).inc()

    def _warn(self, key: str, msg: str, *args: Any) -> None:
        """A warning per key at most once a minute: bad input must be heard, not flood the log."""
        now = time.monotonic()
        if now - self._warned.get(key, -math.inf) >= 60.0:
            self._warned[key] = now
            log.warning(msg, *args)

    def offer(self, domain: Any, rec: Any, source: str, now: float | None = None) -> bool:
        """Keep `rec` as `domain`'s limit if it is one and is not older than the one held."""
        now = time.time() if now is None else now
        why = check_limit(rec, now, self.s.limits_max_future_s)
        if not isinstance(domain, str):
            why = "domain is not a string"
        if why is not None:
            self._count("future_ts" if "future" in why else "bad_record")
            msg = "crosstalk guard: limit record for %r from %s rejected: %s"
            self._warn(f"bad:{source}", msg, domain, source, why)
            return False
        with self._lock:
            cur = self._limits.get(domain)
            if cur is None or rec["ts"] >= cur["ts"]:
                self._limits[domain] = rec
        self._count(source)
        return True

    # --- sources ---

    async def _read(self) -> bytes:
        assert self.s.limits_url is not None
        body = bytearray()
        timeout = httpx.Timeout(self.s.limits_timeout_s)
        async with httpx.AsyncClient(timeout=timeout) as client, client.stream("GET", self.s.limits_url) as r:
            r.raise_for_status()
            async for chunk in r.aiter_bytes():
                body += chunk
                if len(body) > MAX_LIMITS_BYTES:
                    raise ValueError(f"/limits body over {MAX_LIMITS_BYTES} bytes")
        return bytes(body)

    def _fetch(self) -> dict[str, Any]:
        """One GET /limits, bounded in total time, connect to last byte, and in size. httpx's timeouts are
        per read: a server dripping its status line or headers a byte at a time never trips them (issue 42),
        so the whole read runs under one deadline that cancels it, closing the connection."""

        async def bounded() -> bytes:
            return await asyncio.wait_for(self._read(), self.s.limits_timeout_s)

        try:
            body = asyncio.run(bounded())
        except TimeoutError:
            raise _Deadline(f"/limits not read within {self.s.limits_timeout_s:g} s (limits_timeout_s)") from None
        domains = orjson.loads(body).get("domains")
        if not isinstance(domains, dict):
            raise ValueError("no 'domains' object")
        return domains

    def refresh_now(self) -> None:
        """One /limits read, on the caller's thread (the poller's; tests)."""
        try:
            domains = self._fetch()
            now = time.time()
            for domain, rec in domains.items():
                self.offer(domain, rec, "http", now)
        except (httpx.HTTPError, ValueError, TimeoutError, AttributeError, orjson.JSONDecodeError) as exc:
            self._count("fetch_timeout" if isinstance(exc, _Deadline) else "fetch_error")
            url = redact_url(self.s.limits_url or "")  # it may carry a credential: never logged as it is
            self._warn("fetch", "crosstalk guard: limits from %s unavailable: %s", url, redact_text(exc))
        finally:
            self._first.set()  # after the records: the first request sees what the first read brought

    def _http_loop(self) -> None:
        while not self._stop.is_set():
            self.refresh_now()
            self._stop.wait(self.s.limits_refresh_s)

    def _kafka_loop(self) -> None:
        from kafka import KafkaConsumer

        consumer = KafkaConsumer(
            self.settings.scrape.limits_topic,
            bootstrap_servers=self.settings.kafka.bootstrap.split(","),
            group_id=None,  # every gateway reads the whole compacted topic
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        try:
            while not self._stop.is_set():
                for records in consumer.poll(timeout_ms=500).values():
                    for r in records:
                        try:
                            rec, domain = orjson.loads(r.value), r.key.decode()
                        except (orjson.JSONDecodeError, AttributeError, UnicodeDecodeError, TypeError):
                            self._count("bad_record")
                            self._warn("bad:kafka", "crosstalk guard: unreadable limits record at offset %s", r.offset)
                            continue
                        self.offer(domain, rec, "kafka")
        finally:
            consumer.close()

    # --- reads ---

    def _ensure_polling(self) -> None:
        if self.s.limits_url is None or self._polling:
            return
        with self._lock:  # requests on many threads at once start one poller
            if not self._polling:
                self._polling = True
                self._start(self._http_loop, "crosstalk-limits-http")

    def wait_first(self, timeout_s: float) -> bool:
        self._ensure_polling()
        return self._first.wait(timeout_s)

    def get(self, domain: str, now: float) -> dict[str, Any] | None:
        """The domain's limit if fresher than limits_max_age_s, else None (a stale one is logged, counted)."""
        self._ensure_polling()
        with self._lock:
            rec = self._limits.get(domain)
        if rec is None:
            return None
        age = now - float(rec["ts"])
        if age > self.s.limits_max_age_s:
            self.counters["limits.stale"] += 1
            DECISIONS.labels("stale").inc()
            self._warn(
                f"stale:{domain}",
                "crosstalk guard: the limit of cache domain %s is %.0f s old (limits_max_age_s %g): not enforced%s",
                domain,
                age,
                self.s.limits_max_age_s,
                ", requests refused (fail_closed)" if self.s.fail_closed else "; is `crosstalk scrape` running?",
            )
            return None
        return rec

    def strictest(self, now: float) -> tuple[str, dict[str, Any]] | None:
        """The fresh limit with the smallest capacity, over every domain (for models mapped to none)."""
        with self._lock:
            items = list(self._limits.items())
        fresh = [(d, r) for d, r in items if now - float(r["ts"]) <= self.s.limits_max_age_s]
        return min(fresh, key=lambda dr: float(dr[1]["prefill_capacity_tokens"]), default=None)

    def close(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(5)
