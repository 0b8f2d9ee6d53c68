"""`crosstalk scrape`: poll SGLang and vLLM instances (Prometheus /metrics and /v1/models) into cache_stats
events, and publish each cache domain's current prefill capacity as a limit (for gateway guards).

Targets come from settings ([[scrape.targets]]: url, engine, cache_domain, role). Events go to stdout or
a JSONL file, or to the Kafka input topic (`--to kafka`, which also writes the compacted limits topic,
key = cache_domain). The same process serves GET /limits, /metrics (its own counters, Prometheus text)
and /health on scrape.limits_port. An unreachable or malformed target is counted
(`crosstalk_scrape_failures_total{target,reason}`), logged, and the next target is scraped.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import IO, Any

import httpx
import orjson
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from schemas.events import CacheStats, parse_event_obj
from streams.inputs.engine_metrics import READERS, MetricsError, max_model_len
from streams.redact import protect_client_logs, redact_text, redact_url
from streams.settings import ScrapeTarget, Settings, load_settings

log = logging.getLogger("crosstalk.scrape")
protect_client_logs()
LIMIT_ROLES = ("prefill", "unified")  # the pools a prompt is prefilled into


def target_name(t: ScrapeTarget) -> str:
    return t.name or f"{t.engine}:{redact_url(t.url)}"


class Limits:
    """The newest prefill capacity of each cache domain, from the scrapes (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_target: dict[str, tuple[ScrapeTarget, CacheStats]] = {}

    def observe(self, target: ScrapeTarget, stats: CacheStats) -> None:
        with self._lock:
            self._by_target[target_name(target)] = (target, stats)

    def domain(self, cache_domain: str) -> dict[str, Any] | None:
        return self.snapshot().get(cache_domain)

    def snapshot(self) -> dict[str, dict[str, Any]]:
        """cache_domain -> {prefill_capacity_tokens, used_tokens, context_window, ts, targets}; a domain with
        several prefill instances gets the smallest (a prompt must fit the one it lands on)."""
        with self._lock:
            items = list(self._by_target.values())
        out: dict[str, dict[str, Any]] = {}
        for t, st in items:
            if t.role not in LIMIT_ROLES:
                continue
            cur = out.get(st.cache_domain)
            rec = {
                "cache_domain": st.cache_domain,
                "prefill_capacity_tokens": st.capacity_tokens,
                "used_tokens": st.used_tokens,
                "context_window": st.context_window,
                "model": st.model,
                "ts": st.ts,
                "targets": [target_name(t)],
            }
            if cur is None:
                out[st.cache_domain] = rec
                continue
            cur["targets"].append(target_name(t))
            cur["ts"] = min(cur["ts"], st.ts)  # the record is as fresh as its stalest part
            if st.capacity_tokens < cur["prefill_capacity_tokens"]:
                cur.update(prefill_capacity_tokens=st.capacity_tokens, used_tokens=st.used_tokens)
        return out


class Scraper:
    """One round = every target once. Failures never stop a round."""

    def __init__(self, settings: Settings, client: httpx.AsyncClient | None = None) -> None:
        self.settings = settings
        self.s = settings.scrape
        self._client = client
        self.limits = Limits()
        self.registry = CollectorRegistry()
        self.failures = Counter(
            "crosstalk_scrape_failures", "failed scrapes", ["target", "reason"], registry=self.registry
        )
        self.scrapes = Counter("crosstalk_scrapes", "successful scrapes", ["target"], registry=self.registry)
        self.capacity = Gauge(
            "crosstalk_prefill_capacity_tokens", "prefill capacity per domain", ["cache_domain"], registry=self.registry
        )
        self._models: dict[str, tuple[float, str | None, int | None]] = {}  # target -> (fetched, model, window)
        self._seq = 0

    def fail(self, t: ScrapeTarget, reason: str, detail: str) -> None:
        self.failures.labels(target_name(t), reason).inc()
        log.warning("scrape of %s (%s) failed: %s: %s", target_name(t), t.cache_domain, reason, redact_text(detail))

    async def _models_of(self, client: httpx.AsyncClient, t: ScrapeTarget, now: float) -> tuple[str | None, int | None]:
        name = target_name(t)
        cached = self._models.get(name)
        if cached is not None and now - cached[0] < self.s.models_refresh_s:
            return cached[1], cached[2]
        try:
            r = await client.get(t.url.rstrip("/") + t.models_path)
            r.raise_for_status()
            model, window = max_model_len(r.json(), t.model)
        except (httpx.HTTPError, ValueError) as exc:
            # The window is optional evidence: keep the last known one, count, go on.
            self.fail(t, "models_unavailable", f"{type(exc).__name__}: {exc}")
            return (cached[1], cached[2]) if cached else (t.model, None)
        self._models[name] = (now, model, window)
        return model, window

    async def scrape_target(self, client: httpx.AsyncClient, t: ScrapeTarget, now: float) -> CacheStats | None:
        try:
            r = await client.get(t.url.rstrip("/") + t.metrics_path)
            r.raise_for_status()
        except httpx.HTTPError as exc:
            self.fail(t, "unreachable" if not isinstance(exc, httpx.HTTPStatusError) else "http_error", str(exc))
            return None
        try:
            reading = READERS[t.engine](r.text)
        except MetricsError as exc:
            self.fail(t, exc.reason, exc.detail)
            return None
        model, window = await self._models_of(client, t, now)
        self._seq += 1
        ev: dict[str, Any] = {
            "type": "cache_stats",
            "event_id": f"scrape:{target_name(t)}:{int(now * 1000)}:{self._seq}",
            "ts": now,
            "cache_domain": t.cache_domain,
            "role": t.role,
            "capacity_tokens": reading.capacity_tokens,
            "used_tokens": reading.used_tokens,
            "model": t.model or model or reading.model,
            "context_window": window or reading.context_window,
        }
        stats = parse_event_obj({k: v for k, v in ev.items() if v is not None})
        assert isinstance(stats, CacheStats)
        self.scrapes.labels(target_name(t)).inc()
        self.limits.observe(t, stats)
        if t.role in LIMIT_ROLES:
            self.capacity.labels(t.cache_domain).set(stats.capacity_tokens)
        return stats

    async def scrape_once(self, now: float | None = None) -> list[CacheStats]:
        now = time.time() if now is None else now
        client = self._client or httpx.AsyncClient(timeout=self.s.timeout_s)
        try:
            got = await asyncio.gather(*(self.scrape_target(client, t, now) for t in self.s.targets))
        finally:
            if self._client is None:
                await client.aclose()
        return [g for g in got if g is not None]


# --- outputs and the limits endpoint ------------------------------------------------------------------


class KafkaPublisher:
    """cache_stats to the input topic; limits to the compacted limits topic (key = cache_domain)."""

    def __init__(self, settings: Settings) -> None:
        from kafka.admin import NewTopic
        from kafka.errors import TopicAlreadyExistsError

        from streams.kafka.topics import admin_client
        from streams.producer import GatewayProducer

        self.gp = GatewayProducer(settings)
        self.limits_topic = settings.scrape.limits_topic
        admin = admin_client(settings.kafka.bootstrap)
        try:
            if self.limits_topic not in set(admin.list_topics()):
                cfg = {"cleanup.policy": "compact", "min.compaction.lag.ms": "60000"}
                topic = NewTopic(self.limits_topic, 1, settings.kafka.replication_factor, topic_configs=cfg)
                with contextlib.suppress(TopicAlreadyExistsError):
                    admin.create_topics([topic])
        finally:
            admin.close()

    def __call__(self, events: list[CacheStats], limits: dict[str, dict[str, Any]]) -> None:
        for ev in events:
            self.gp.publish(ev)
        for domain, rec in limits.items():
            self.gp._producer.send(self.limits_topic, key=domain.encode(), value=orjson.dumps(rec))
        self.gp.flush()

    def close(self) -> None:
        self.gp.close()


def jsonl_writer(out: IO[bytes]) -> Callable[[list[CacheStats], dict[str, dict[str, Any]]], None]:
    def write(events: list[CacheStats], limits: dict[str, dict[str, Any]]) -> None:
        for ev in events:
            out.write(ev.model_dump_json(exclude_none=True).encode() + b"\n")
        out.flush()

    return write


def limits_app(scraper: Scraper) -> Any:
    from aiohttp import web

    async def limits(_: web.Request) -> web.Response:
        body = {"generated_at": time.time(), "domains": scraper.limits.snapshot()}
        return web.Response(body=orjson.dumps(body), content_type="application/json")

    async def metrics(_: web.Request) -> web.Response:
        return web.Response(body=generate_latest(scraper.registry), content_type="text/plain")

    async def health(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_get("/limits", limits)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/health", health)
    return app


async def serve(
    scraper: Scraper,
    emit: Callable[[list[CacheStats], dict[str, dict[str, Any]]], None],
    *,
    rounds: int | None = None,
    port: int | None = None,
    stop: asyncio.Event | None = None,
    on_port: Callable[[int], None] | None = None,
) -> None:
    """Scrape every interval_s (rounds: how many; None = until stop), serving /limits meanwhile."""
    from aiohttp import web

    s = scraper.s
    runner = None
    port = s.limits_port if port is None else port
    if port is not None and (port > 0 or on_port is not None):
        runner = web.AppRunner(limits_app(scraper), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, s.limits_bind, port)
        await site.start()
        bound = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        log.info("limits on http://%s:%d/limits", s.limits_bind, bound)
        if on_port is not None:
            on_port(bound)
    stop = stop or asyncio.Event()
    done = 0
    try:
        while not stop.is_set() and (rounds is None or done < rounds):
            started = time.monotonic()
            events = await scraper.scrape_once()
            emit(events, scraper.limits.snapshot())
            done += 1
            if rounds is not None and done >= rounds:
                break
            wait = max(0.0, s.interval_s - (time.monotonic() - started))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), wait)
    finally:
        if runner is not None:
            await runner.cleanup()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--to", choices=["jsonl", "kafka"], default="jsonl")
    parser.add_argument("--out", help="--to jsonl: events file (default: stdout)")
    parser.add_argument("--once", action="store_true", help="one round, then exit")
    parser.add_argument("--limits-port", type=int, help="GET /limits port (default: scrape.limits_port; 0: off)")


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    settings = load_settings(getattr(args, "config", None))
    if not settings.scrape.targets:
        raise SystemExit("crosstalk scrape: no [[scrape.targets]] in the settings")
    scraper = Scraper(settings)
    out: Any = None
    publisher: KafkaPublisher | None = None
    if args.to == "kafka":
        publisher = KafkaPublisher(settings)
        emit: Any = publisher
    else:
        out = sys.stdout.buffer if args.out in (None, "-") else open(args.out, "ab")  # noqa: SIM115
        emit = jsonl_writer(out)

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        port = 0 if args.once and args.limits_port is None else args.limits_port
        await serve(scraper, emit, rounds=1 if args.once else None, port=port, stop=stop)

    try:
        asyncio.run(main())
    finally:
        if publisher is not None:
            publisher.close()
        if out is not None and out is not sys.stdout.buffer:
            out.close()
    return 0
