"""`crosstalk scrape`: poll SGLang and vLLM instances (Prometheus /metrics and /v1/models) into cache_stats
events, and publish each cache domain's current prefill capacity as a limit (for gateway guards).

Targets come from settings ([[scrape.targets]]: url, engine, cache_domain, role). Events go to stdout or
a JSONL file, or to the Kafka input topic (`--to kafka`, which also writes the compacted limits topic,
key = cache_domain). The same process serves GET /limits (each domain's limit, and each target's last
outcome), /metrics (its own counters, Prometheus text) and /health on scrape.limits_port.

Each target is scraped on its own task, within scrape.deadline_s (connect to last byte) and
scrape.max_body_bytes, so a slow, endless or hostile target costs only its own reading. A target that is
unreachable, too slow, too large, or reports a value that is no token count (+Inf, NaN, 1e308, a capacity
of 0.5) gets a status with the reason on /limits and `crosstalk_scrape_failures_total{target,reason}`;
no limit is published from it, and its last good limit ages out on the guard's side (limits_max_age_s).
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

from schemas.events import CacheStats, EventError, parse_event_obj
from streams.inputs.engine_metrics import READERS, MetricsError, PoolReading, max_model_len
from streams.inputs.scrape_http import FetchError, fetch_exposition, fetch_json
from streams.outputs import JsonlOutput, KafkaOutput
from streams.redact import protect_client_logs, redact_text, redact_url
from streams.settings import ScrapeTarget, Settings, load_settings

log = logging.getLogger("crosstalk.scrape")
protect_client_logs()
LIMIT_ROLES = ("prefill", "unified")  # the pools a prompt is prefilled into
Emitted = tuple[list[CacheStats], dict[str, dict[str, Any]]]  # a scrape's events, and its domain's limit


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
            if st.role not in LIMIT_ROLES:
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
    """Scrapes targets, each on its own (a slow or hostile target never delays another), each bounded by
    scrape.deadline_s and scrape.max_body_bytes. Nothing a target sends stops the process: every failure is
    that target's status, with a reason and a counter, and its last good limit ages out on the guard's side."""

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
        self.up = Gauge(
            "crosstalk_scrape_target_ok", "1: the last scrape gave a reading", ["target"], registry=self.registry
        )
        self.emit_failures = Counter("crosstalk_scrape_emit_failures", "outputs that failed", registry=self.registry)
        self.dropped = Counter(
            "crosstalk_scrape_figures_dropped",
            "optional figures (reuse, pools, hand-off) a target reported as nonsense",
            ["target"],
            registry=self.registry,
        )
        self.roles: dict[str, str] = {}  # target -> the role its metrics last showed (targets without a role)
        self.status: dict[str, dict[str, Any]] = {}  # target -> its last scrape's outcome (GET /limits "targets")
        self._models: dict[str, tuple[float, str | None, int | None]] = {}  # target -> (fetched, model, window)
        self._seq = 0

    def role_of(self, t: ScrapeTarget, reading: PoolReading | None = None) -> tuple[str, str]:
        """(role, where it came from): the settings', else the one the engine's metrics show now or showed
        before (a decode server between requests looks unified); else, beside a prefill server of the same
        cache domain, decode (a domain split into prefill and decode has no unified server); else unified."""
        if t.role is not None:
            return t.role, "configured"
        name = target_name(t)
        if reading is not None and reading.role is not None:
            if self.roles.get(name) not in (None, reading.role):
                log.warning("%s (%s) now shows role %s", name, t.cache_domain, reading.role)
            self.roles[name] = reading.role
        seen = self.roles.get(name)
        if seen is not None:
            return seen, "derived"
        if any(self._shown_role(o) == "prefill" for o in self.s.targets if o.cache_domain == t.cache_domain):
            return "decode", "derived"
        return "unified", "assumed"

    def _shown_role(self, t: ScrapeTarget) -> str | None:
        return t.role if t.role is not None else self.roles.get(target_name(t))

    def _note(self, t: ScrapeTarget, now: float, status: str, detail: str | None = None) -> None:
        name = target_name(t)
        prev = self.status.get(name, {})
        self.status[name] = {
            "cache_domain": t.cache_domain,
            "role": self.role_of(t)[0],
            "status": status,
            "detail": detail,
            "checked": now,
            "last_ok": now if status == "ok" else prev.get("last_ok"),
            "models": prev.get("models", "unread"),
        }
        self.up.labels(name).set(1 if status == "ok" else 0)

    def fail(self, t: ScrapeTarget, reason: str, detail: str, now: float | None = None) -> None:
        self.failures.labels(target_name(t), reason).inc()
        detail = redact_text(detail)  # HTTP errors quote the URL, credentials included; /limits shows it too
        log.warning("scrape of %s (%s) failed: %s: %s", target_name(t), t.cache_domain, reason, detail)
        if not reason.startswith("models_"):
            self._note(t, time.time() if now is None else now, reason, detail)

    async def _models_of(self, client: httpx.AsyncClient, t: ScrapeTarget, now: float) -> tuple[str | None, int | None]:
        """/v1/models' model id and window, re-read every models_refresh_s; the caller bounds the time."""
        name = target_name(t)
        cached = self._models.get(name)
        if cached is not None and now - cached[0] < self.s.models_refresh_s:
            return cached[1], cached[2]
        try:
            model, window = max_model_len(await fetch_json(client, t.url.rstrip("/") + t.models_path), t.model)
        except (FetchError, MetricsError, ValueError) as exc:
            # The window is optional evidence: keep the last good one, count, go on with the capacity.
            reason = exc.reason if isinstance(exc, MetricsError) else "models_unavailable"
            self.fail(t, reason, str(exc)[:300])
            self.status.get(name, {})["models"] = reason
            return (cached[1], cached[2]) if cached else (t.model, None)
        self._models[name] = (now, model, window)
        self.status.get(name, {})["models"] = "ok"
        return model, window

    async def scrape_target(
        self, client: httpx.AsyncClient, t: ScrapeTarget, now: float | None = None
    ) -> CacheStats | None:
        """One scrape of one target; never raises (the failure is the target's status and a counter)."""
        now = time.time() if now is None else now
        try:
            return await self._scrape(client, t, now)
        except Exception as exc:  # a bug must cost this target's reading, never the process and the others
            log.exception("scrape of %s: unexpected error", target_name(t))
            self.fail(t, "internal", f"{type(exc).__name__}: {exc}"[:300], now)
            return None

    async def _scrape(self, client: httpx.AsyncClient, t: ScrapeTarget, now: float) -> CacheStats | None:
        deadline = asyncio.get_running_loop().time() + self.s.deadline_s
        url = t.url.rstrip("/") + t.metrics_path
        try:
            async with asyncio.timeout_at(deadline):
                text = await fetch_exposition(client, url, t.engine, self.s.max_body_bytes)
                # Off the event loop: a large body within the cap takes seconds to parse, and /limits must answer.
                reading = await asyncio.to_thread(READERS[t.engine], text)
        except TimeoutError:
            self.fail(t, "deadline", f"GET {url}: no complete answer within {self.s.deadline_s:g} s", now)
            return None
        except (FetchError, MetricsError) as exc:
            self.fail(t, exc.reason, exc.detail, now)
            return None
        self._note(t, now, "ok")
        try:
            async with asyncio.timeout_at(deadline):  # the rest of the same deadline
                model, window = await self._models_of(client, t, now)
        except TimeoutError:  # raised by timeout_at's exit when it cancelled _models_of mid-read
            self.fail(t, "models_unavailable", "deadline")
            self.status[target_name(t)]["models"] = "models_unavailable"
            cached = self._models.get(target_name(t))
            model, window = (cached[1], cached[2]) if cached else (t.model, None)
        return self._publish(t, now, reading, model, window)

    def _publish(
        self, t: ScrapeTarget, now: float, reading: PoolReading, model: str | None, window: int | None
    ) -> CacheStats | None:
        self._seq += 1
        role, role_source = self.role_of(t, reading)
        if reading.dropped:
            self.dropped.labels(target_name(t)).inc(len(reading.dropped))
            log.warning("scrape of %s: figures left out: %s", target_name(t), "; ".join(reading.dropped))
        ev: dict[str, Any] = {
            "type": "cache_stats",
            "event_id": f"scrape:{target_name(t)}:{int(now * 1000)}:{self._seq}",
            "ts": now,
            "cache_domain": t.cache_domain,
            "role": role,
            "role_source": role_source,
            "capacity_tokens": reading.capacity_tokens,
            "used_tokens": reading.used_tokens,
            "model": t.model or model or reading.model,
            "context_window": window or reading.context_window,
            "prefix_cache_hits_total": reading.prefix_cache_hits,
            "prefix_cache_queries_total": reading.prefix_cache_queries,
            "cache_hit_rate": reading.cache_hit_rate,
            "swa_usage": reading.swa_usage,
            "mamba_usage": reading.mamba_usage,
            "handoff_queue_reqs": reading.handoff_queue_reqs,
            "kv_transfer_latency_ms": reading.kv_transfer_latency_ms,
        }
        try:
            stats = parse_event_obj({k: v for k, v in ev.items() if v is not None})
        except EventError as exc:  # e.g. a cache_domain the contract refuses: the settings' fault, said per scrape
            self.fail(t, "invalid_event", f"{exc.reason}: {exc.detail}"[:300], now)
            return None
        assert isinstance(stats, CacheStats)
        self.scrapes.labels(target_name(t)).inc()
        self.limits.observe(t, stats)
        if stats.role in LIMIT_ROLES:
            self.capacity.labels(t.cache_domain).set(stats.capacity_tokens)
        return stats

    def client(self) -> httpx.AsyncClient:
        return self._client or httpx.AsyncClient(timeout=self.s.timeout_s)

    async def scrape_once(self, now: float | None = None) -> list[CacheStats]:
        """Every target once, concurrently: the round takes at most deadline_s, whatever the targets do."""
        now = time.time() if now is None else now
        client = self.client()
        try:
            got = await asyncio.gather(*(self.scrape_target(client, t, now) for t in self.s.targets))
        finally:
            if self._client is None:
                await client.aclose()
        return [g for g in got if g is not None]

    async def run_target(
        self, client: httpx.AsyncClient, t: ScrapeTarget, out: asyncio.Queue[Emitted | None], rounds: int | None
    ) -> None:
        """Scrape one target every interval_s (rounds times; None: until cancelled), queueing what to emit."""
        done = 0
        while rounds is None or done < rounds:
            started = time.monotonic()
            stats = await self.scrape_target(client, t)
            if stats is not None:
                rec = self.limits.domain(t.cache_domain) if stats.role in LIMIT_ROLES else None
                out.put_nowait(([stats], {t.cache_domain: rec} if rec is not None else {}))
            done += 1
            if rounds is None or done < rounds:
                await asyncio.sleep(max(0.0, self.s.interval_s - (time.monotonic() - started)))

    def targets(self) -> dict[str, dict[str, Any]]:
        return {k: dict(v) for k, v in self.status.items()}


# --- outputs and the limits endpoint ------------------------------------------------------------------


class KafkaPublisher:
    """cache_stats to the input topic (a `KafkaOutput`); limits to the compacted limits topic (key = cache_domain)."""

    def __init__(self, settings: Settings) -> None:
        from kafka.admin import NewTopic
        from kafka.errors import TopicAlreadyExistsError

        from streams.producer import admin_client

        self.output = KafkaOutput(settings)
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
        self.output.send(events)
        for domain, rec in limits.items():
            self.output.producer.send(self.limits_topic, key=domain.encode(), value=orjson.dumps(rec))
        self.output.flush()

    def close(self) -> None:
        self.output.close()


def jsonl_writer(out: IO[bytes]) -> Callable[[list[CacheStats], dict[str, dict[str, Any]]], None]:
    """cache_stats as JSON Lines (limits are served on /limits only)."""
    output = JsonlOutput(out)

    def write(events: list[CacheStats], limits: dict[str, dict[str, Any]]) -> None:
        output.send(events)

    return write


def limits_app(scraper: Scraper) -> Any:
    from aiohttp import web

    async def limits(_: web.Request) -> web.Response:
        body = {"generated_at": time.time(), "domains": scraper.limits.snapshot(), "targets": scraper.targets()}
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


async def _emitter(
    scraper: Scraper, queue: asyncio.Queue[Emitted | None], emit: Callable[[list[CacheStats], dict[str, Any]], None]
) -> None:
    """Hands what the targets scraped to `emit` in order, on a thread: a Kafka flush or a slow disk must not
    hold the event loop (and with it /limits and every target's deadline)."""
    while (item := await queue.get()) is not None:
        try:
            await asyncio.to_thread(emit, *item)
        except Exception:
            scraper.emit_failures.inc()
            log.exception("crosstalk scrape: output failed (%d events)", len(item[0]))


async def _start_limits(scraper: Scraper, port: int | None, on_port: Callable[[int], None] | None) -> Any:
    from aiohttp import web

    s = scraper.s
    port = s.limits_port if port is None else port
    if not (port > 0 or on_port is not None):
        return None
    runner = web.AppRunner(limits_app(scraper), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, s.limits_bind, port)
    await site.start()
    bound = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    log.info("limits on http://%s:%d/limits", s.limits_bind, bound)
    if on_port is not None:
        on_port(bound)
    return runner


async def serve(
    scraper: Scraper,
    emit: Callable[[list[CacheStats], dict[str, dict[str, Any]]], None],
    *,
    rounds: int | None = None,
    port: int | None = None,
    stop: asyncio.Event | None = None,
    on_port: Callable[[int], None] | None = None,
) -> bool:
    """Scrape every target every interval_s, each on its own task (rounds: how many per target; None: until
    stop), serving /limits meanwhile. Returns False when `stop` ended it before the rounds were done; what
    was scraped by then is still emitted."""
    runner = await _start_limits(scraper, port, on_port)
    stop = stop or asyncio.Event()
    queue: asyncio.Queue[Emitted | None] = asyncio.Queue()
    client = scraper.client()
    emitter = asyncio.create_task(_emitter(scraper, queue, emit))
    targets = asyncio.gather(*(scraper.run_target(client, t, queue, rounds) for t in scraper.s.targets))
    stopped = asyncio.create_task(stop.wait())
    try:
        waiting: list[asyncio.Future[Any]] = [targets, stopped]
        await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        completed = targets.done() and not targets.cancelled()
    finally:
        targets.cancel()
        stopped.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await targets
        queue.put_nowait(None)
        await emitter
        if client is not scraper._client:
            await client.aclose()
        if runner is not None:
            await runner.cleanup()
    return completed


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

    async def main() -> bool:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        port = 0 if args.once and args.limits_port is None else args.limits_port
        return await serve(scraper, emit, rounds=1 if args.once else None, port=port, stop=stop)

    try:
        completed = asyncio.run(main())
    finally:
        if publisher is not None:
            publisher.close()
        if out is not None and out is not sys.stdout.buffer:
            out.close()
    if scraper.emit_failures._value.get():
        return 4  # EXIT_OUTPUT: something scraped could not be written
    return 130 if args.once and not completed else 0  # --once cut short by SIGINT/SIGTERM
