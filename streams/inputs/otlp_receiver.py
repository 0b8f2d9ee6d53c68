"""The OTLP/HTTP receiver of `crosstalk otlp`: POST /v1/traces, POST /v1/logs (GenAI content in log records,
joined to their spans: streams.inputs.otlp_join), GET /health and /counters.

Hostile peers are bad input, and the receiver's own resources are bounded (docs/security.md, its limits
under attack):
  * who: with otlp.tokens, a request without a known bearer token gets 401 before its body is read,
    and its sender's spans may assert only the tenants the token allows (streams.inputs.otlp_auth);
  * memory: bodies are inflated as they stream, never past otlp.max_body_bytes (413), and all requests
    together hold at most otlp.max_inflight_bytes (503: exporters retry) (streams.inputs.otlp_body);
  * time: a connection must send its first request head within otlp.header_timeout_s (a watchdog here;
    later heads: aiohttp's keep-alive timer) and its body within otlp.body_timeout_s (408);
  * the event loop: decoding, mapping and detection run on one worker thread, so /health answers while
    a batch of 30k spans is mapped.
Each answer is an ExportTraceServiceResponse; partial_success counts the spans refused -- by the mapping,
by authorization, or by the detection core (future_ts, duplicate, canary_tenant) -- and says why.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson

from detectors.monitor import make_fingerprinter
from streams.inputs.otlp import Mapped, Sender, SpanMapper, SpanReject
from streams.inputs.otlp_auth import Authenticator, Unauthenticated, check_bind, quiet_request_lines
from streams.inputs.otlp_body import BIG, BodyError, Budget, read_body
from streams.inputs.otlp_join import JoinedInput, logs_response
from streams.outputs import Letter, Output, Refused
from streams.settings import Settings

log = logging.getLogger("crosstalk.otlp")
TICK_S = 1.0  # the output's clock: how late past overlap_hold_s a held finding may come out


def _span_reject(r: Refused) -> SpanReject:
    """An event the output refused, as the span it came from (its traceparent: 00-<trace>-<span>-01)."""
    trace_id, _, span_id = (r.event.traceparent or "")[3:-3].rpartition("-")
    return SpanReject(r.reason, r.detail, trace_id, span_id)


class OtlpReceiver:
    """OTLP/HTTP trace receiver: POST /v1/traces (application/x-protobuf or application/json, gzip or
    deflate), GET /health and /counters. Answers with ExportTraceServiceResponse, partial_success naming
    rejects. `output` (streams/outputs/) takes the events, and may return those it refused, and the rejects."""

    def __init__(self, settings: Settings, output: Output) -> None:
        self.settings = settings
        self.mapper = SpanMapper(settings.otlp, make_fingerprinter(settings.detection))
        self.auth = Authenticator(settings)
        self.output = output
        self.counters: Counter[str] = Counter()
        self._mapper_counters: dict[str, int] = {}
        self._lock = threading.Lock()  # one batch at a time through the mapper and the output
        self._stats = threading.Lock()  # the counters, read by /counters on the event loop
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="otlp-map")
        o = settings.otlp
        self._budget = Budget(max(o.max_inflight_bytes, o.max_body_bytes))
        self._trim_scheduled = False
        self._started: set[Any] = set()  # connections (aiohttp RequestHandlers) that sent a whole request head
        self._watchdog: asyncio.Task[None] | None = None
        self._runner: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self.port: int | None = None
        self._join_counters: dict[str, int] = {}
        self.joined = JoinedInput(self)  # POST /v1/logs: content in log records, joined to their spans
        self._ticker: asyncio.Task[None] | None = None
        self._clock: asyncio.Task[None] | None = None
        self._state: dict[str, int] = {}  # the output's state (held findings, ...) as of its last tick

    def count(self, *keys: str, n: int = 1) -> None:
        with self._stats:
            for key in keys:
                self.counters[key] += n

    def handle(self, body: bytes | bytearray, content_type: str, sender: Sender | None = None) -> Mapped:
        """Map one request's payload and hand it to the output; the rejects returned include the spans the
        output refused. Runs on the mapping thread (or the caller's, in tests)."""
        encoding = "otlp_json" if "json" in content_type else "otlp_proto"
        with self._lock:
            out = self.deliver(self.mapper.map_payload(body, encoding, sender), sender)
            self.joined.flush_locked()
        return out

    def deliver(self, out: Mapped, sender: Sender | None, what: str = "traces") -> Mapped:
        """Hand a mapping's events to the output, dead-letter its rejects, count; the caller holds the mapping
        lock. `what`: traces | logs (a request) | joined (halves mapped when their wait ran out)."""
        source = "otlp-http" if sender is None else f"otlp-http:{sender.name}"
        out.refused = [_span_reject(r) for r in self.output.send(out.events)]
        for r in out.rejects:
            self.output.dead_letter(Letter(source, r.record(), r.reason, r.detail))
        mapper_counters = dict(self.mapper.counters)
        join_counters = {f"join.{k}": v for k, v in self.joined.joiner.counters.items()}
        with self._stats:
            self._mapper_counters = mapper_counters
            self._join_counters = join_counters
            if what != "joined":
                self.counters["requests" if what == "traces" else "logs.requests"] += 1
            self.counters["spans.mapped"] += len(out.events) // 2
            self.counters["spans.skipped"] += sum(out.skipped.values())
            self.counters.update(f"rejects.{r.reason}" for r in out.rejects + out.refused)
            if sender is not None:
                self.counters[f"sender.{sender.name}.requests"] += 1
                self.counters[f"sender.{sender.name}.rejected_spans"] += out.rejected_spans
        return out

    # --- HTTP ---------------------------------------------------------------------------------------

    def _authenticate(self, request: Any) -> Sender | None:
        try:
            return self.auth.authenticate(request.headers.get("Authorization"))
        except Unauthenticated as exc:
            self.count("rejects.unauthenticated")
            # Who tried is worth a line; what they presented is not (it may be a real token mistyped).
            log.warning("OTLP request refused (%s) from %s", exc.reason, request.remote)
            raise

    def _sees_senders(self, request: Any) -> bool:
        """Whether /counters may name the senders: with tokens configured, only to a caller presenting one
        (neither counted nor logged as a refusal: a monitor polling without a token is no attack)."""
        try:
            self.auth.authenticate(request.headers.get("Authorization"))
        except Unauthenticated:
            return False
        return True

    async def _traces(self, request: Any) -> Any:
        from aiohttp import web

        try:
            sender = self._authenticate(request)
        except Unauthenticated as exc:
            return web.Response(status=401, text=exc.reason, headers={"WWW-Authenticate": 'Bearer realm="otlp"'})
        o = self.settings.otlp
        if request.content_length is not None and request.content_length > o.max_body_bytes:
            self.count("rejects.oversized")
            return web.Response(status=413, text=f"body larger than {o.max_body_bytes} bytes")
        try:
            body = await read_body(
                request.content,
                request.headers.get("Content-Encoding", ""),
                o.max_body_bytes,
                o.body_timeout_s,
                self._budget,
            )
        except BodyError as exc:
            self._release(big=exc.status in (408, 413, 503))
            self.count(f"rejects.{exc.reason}")
            resp = web.Response(status=exc.status, text=exc.detail)
            if exc.status == 503:
                resp.headers["Retry-After"] = "1"
            if exc.status in (408, 413):
                resp.force_close()  # what is left of the body is not worth reading
            return resp
        held = len(body)
        ctype = request.content_type or "application/x-protobuf"
        try:
            loop = asyncio.get_running_loop()
            handle = self.joined.handle_logs if request.path == "/v1/logs" else self.handle
            out = await loop.run_in_executor(self._pool, handle, body, ctype, sender)
        except Exception:
            # Not the spans (the mapping rejects those one by one) but the output: the broker is away, a
            # file cannot be written. 503 makes the exporter send the batch again; ids make that safe.
            log.exception("OTLP batch not taken: the output failed")
            self.count("rejects.output_failed")
            return web.Response(status=503, text="the output failed; retry later", headers={"Retry-After": "5"})
        finally:
            del body
            self._budget.give(held)
            self._release(big=held >= BIG)
        return logs_response(out, ctype) if request.path == "/v1/logs" else self._answer(out, ctype)

    def _release(self, big: bool) -> None:
        """Memory back to the system once no big body is held; a trim put off (at most 2 a second) is done
        a little later, so that the last of a burst of bombs does not leave its pages resident."""
        self._budget.release(big)
        if self._budget.big_since_trim and not self._trim_scheduled:
            self._trim_scheduled = True

            def later() -> None:
                self._trim_scheduled = False
                self._release(False)

            asyncio.get_running_loop().call_later(0.6, later)

    def _answer(self, out: Mapped, ctype: str) -> Any:
        from aiohttp import web

        if out.payload_error is not None:  # the payload itself was not OTLP: the client should know, not retry
            whole = out.payload_error
            log.warning("OTLP payload rejected: %s: %s", whole.reason, whole.detail)
            # More than the receiver decodes in one request: too large, as a body past max_body_bytes is.
            status = 413 if whole.reason in ("too_many_spans", "too_many_objects") else 400
            return web.Response(status=status, text=f"{whole.reason}: {whole.detail}")
        rejected = out.rejected_spans
        msg = "; ".join(sorted({f"{r.reason}: {r.detail}" for r in out.rejects + out.refused}))[:1000]
        if "json" in ctype:
            payload: dict[str, Any] = {}
            if rejected:
                payload["partialSuccess"] = {"rejectedSpans": str(rejected), "errorMessage": msg}
            return web.Response(body=orjson.dumps(payload), content_type="application/json")
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

        resp = ExportTraceServiceResponse()
        if rejected:
            resp.partial_success.rejected_spans = rejected
            resp.partial_success.error_message = msg
        return web.Response(body=resp.SerializeToString(), content_type="application/x-protobuf")

    def _app(self) -> Any:
        from aiohttp import web

        async def health(_: web.Request) -> web.Response:
            return web.Response(text="ok")

        async def counters(request: web.Request) -> web.Response:
            with self._stats:
                data = {**self.counters, **{f"mapper.{k}": v for k, v in self._mapper_counters.items()}}
                data.update(self._join_counters)
                # The judging output's state (the embedded core): `held_findings` waiting now, held in all, ...
                data.update({"held_findings": 0, **self._state})
            if not self._sees_senders(request):  # totals for anyone who can reach the port, names for senders
                data = {k: v for k, v in data.items() if not k.startswith("sender.")}
            return web.Response(body=orjson.dumps(data), content_type="application/json")

        @web.middleware
        async def head_seen(request: web.Request, handler: Any) -> Any:
            self._started.add(request.protocol)
            return await handler(request)

        app = web.Application(client_max_size=self.settings.otlp.max_body_bytes + 1024, middlewares=[head_seen])
        app.router.add_post("/v1/traces", self._traces)
        app.router.add_post("/v1/logs", self._traces)  # the same reading; the path picks the mapping
        app.router.add_get("/health", health)
        app.router.add_get("/counters", counters)
        return app

    async def start_async(self, bind: str | None = None, port: int | None = None) -> int:
        from aiohttp import web

        o = self.settings.otlp
        bind = bind or o.bind
        port = o.port if port is None else port
        check_bind(self.settings, bind, port)
        quiet_request_lines()
        self._runner = web.AppRunner(
            self._app(),
            access_log=None,
            # We inflate ourselves, bounded (streams.inputs.otlp_body): aiohttp's inflating is not.
            auto_decompress=False,
            # between requests: a kept-alive connection whose next head does not come within it is closed
            keepalive_timeout=o.header_timeout_s,
            lingering_time=2.0,
        )
        await self._runner.setup()
        watch = self._watch_heads(self._runner.server, o.header_timeout_s)
        self._watchdog = asyncio.get_running_loop().create_task(watch)
        self._ticker = asyncio.get_running_loop().create_task(self.joined.tick())
        self._clock = asyncio.get_running_loop().create_task(self._tick_output())
        site = web.TCPSite(self._runner, bind, port)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        if self.auth.required:
            log.info("OTLP receiver requires bearer tokens (%d senders)", len(o.tokens))
        return self.port

    async def _watch_heads(self, server: Any, timeout_s: float) -> None:
        """Close connections that have not sent a whole first request head within `timeout_s` (slowloris:
        a byte now and then keeps a connection that never becomes a request). aiohttp's keep-alive timer
        guards the time between requests, and only its newest releases the time before the first one."""
        loop = asyncio.get_running_loop()
        first_seen: dict[Any, float] = {}
        while True:
            await asyncio.sleep(timeout_s / 4)
            now = loop.time()
            live = set(server.connections)
            self._started &= live
            first_seen = {h: t for h, t in first_seen.items() if h in live}
            for h in live - self._started:
                if now - first_seen.setdefault(h, now) >= timeout_s:
                    self.count("rejects.header_timeout")
                    h.force_close()

    async def _tick_output(self) -> None:
        """The output's clock, once every TICK_S on the mapping thread: a cold domain's held findings come out
        `overlap_hold_s` after their response, within TICK_S, with no further input (issue 40). The core reads no
        clock; this passes the wall clock in, and reads the output's state for /counters."""
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(TICK_S)
            try:
                await loop.run_in_executor(self._pool, self._tick)
            except Exception:  # a failing tick must not stop the clock: logged, counted, tried again
                log.exception("output tick failed")
                self.count("output.tick_failed")

    def _tick(self) -> None:
        with self._lock:
            self.output.tick(time.time())
            state = self.output.state_size()
        with self._stats:
            self._state = state

    async def stop_async(self) -> None:
        if self._clock is not None:
            self._clock.cancel()
        if self._watchdog is not None:
            self._watchdog.cancel()
        if self._ticker is not None:
            self._ticker.cancel()
        if self._runner is not None:
            await self._runner.cleanup()
        self._pool.shutdown(wait=True)
        self.joined.flush_all()  # no request is in flight now: what waits for its other half goes on alone

    def start_in_thread(self, port: int = 0) -> int:
        """For tests and embedding: serve on a background thread; port 0 picks a free one."""
        ready = threading.Event()
        failed: list[BaseException] = []

        def main() -> None:
            self._loop = asyncio.new_event_loop()
            try:
                self._loop.run_until_complete(self.start_async(port=port))
            except BaseException as exc:  # e.g. UnsafeBind: the caller hears of it
                failed.append(exc)
                ready.set()
                return
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=main, name="otlp-receiver", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("OTLP receiver did not start")
        if failed:
            raise failed[0]
        assert self.port is not None
        return self.port

    def stop_thread(self) -> None:
        if self._loop is None:
            return
        asyncio.run_coroutine_threadsafe(self.stop_async(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)
