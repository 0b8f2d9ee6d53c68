"""`crosstalk otlp`: OTLP GenAI spans in, over OTLP/HTTP (/v1/traces, protobuf and JSON) or from the
OpenTelemetry Collector's Kafka exporter topic (`--from-kafka`; encodings otlp_proto and otlp_json).

Spans are mapped by streams.inputs.otlp (text fingerprinted at once) and go to one output:
  --to embedded  the detectors in this process; alerts as JSON Lines (no broker needed; the default)
  --to kafka     crosstalk's input topic (the workers detect); unmappable spans to the dead-letter topic
  --to jsonl     an events file, for `crosstalk replay` later
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
import threading
from collections import Counter
from typing import Any

import orjson

from detectors.monitor import make_fingerprinter
from schemas.events import Event
from streams.inputs.otlp import Mapped, SpanMapper, SpanReject
from streams.settings import Settings, load_settings, require_fingerprint_key, with_run_key
from streams.sinks.base import ByteOut

log = logging.getLogger("crosstalk.otlp")

H_REASON = "x-crosstalk-reason"  # the dead-letter headers of the workers (streams/kafka/app.py)
H_DETAIL = "x-crosstalk-detail"
H_SRC_TOPIC = "x-crosstalk-source-topic"
H_SRC_PARTITION = "x-crosstalk-source-partition"
H_SRC_OFFSET = "x-crosstalk-source-offset"


# --- outputs ---------------------------------------------------------------------------------------


class EmbeddedOutput:
    """Detect in-process: the embedded runner's core, fed as spans arrive (live traffic is in time order)."""

    def __init__(self, settings: Settings, alerts_out: ByteOut | None, rejects_out: ByteOut | None) -> None:
        from streams.embedded.runner import EmbeddedRunner
        from streams.sinks import build_sinks
        from streams.sinks.jsonl import AlertWriter

        self.runner = EmbeddedRunner(settings, [AlertWriter(alerts_out), *build_sinks(settings)], rejects_out)
        self.alerts = self.runner.result.alerts

    def events(self, events: list[Event]) -> None:
        for ev in sorted(events, key=lambda e: e.ts):
            self.runner.feed(ev, "otlp")

    def rejects(self, rejects: list[SpanReject], source: str) -> None:
        for r in rejects:
            self.runner.reject(source, None, r.reason, r.detail, orjson.dumps(r.record()))

    def close(self) -> None:
        import time

        self.runner.finish(time.perf_counter())


class JsonlOutput:
    def __init__(self, out: ByteOut, rejects_out: ByteOut | None) -> None:
        self.out = out
        self.rejects_out = rejects_out

    def events(self, events: list[Event]) -> None:
        for ev in events:
            self.out.write(ev.model_dump_json(exclude_none=True).encode() + b"\n")
        self.out.flush()

    def rejects(self, rejects: list[SpanReject], source: str) -> None:
        if self.rejects_out is not None:
            for r in rejects:
                self.rejects_out.write(orjson.dumps({"source": source, **r.record()}) + b"\n")
            self.rejects_out.flush()

    def close(self) -> None:
        self.out.flush()


class KafkaOutput:
    """Events to the input topic (keyed, traceparent header); rejects to the dead-letter topic.

    A dead letter holds the reason and span ids, never the span: it may carry message text. The
    original stays where it came from (the Collector topic's offset is in the headers)."""

    def __init__(self, settings: Settings, producer: Any = None) -> None:
        from streams.producer import GatewayProducer

        self.gp = GatewayProducer(settings, producer=producer)
        self.deadletter_topic = settings.kafka.deadletter_topic

    def events(self, events: list[Event]) -> None:
        for ev in events:
            self.gp.publish(ev)

    def rejects(self, rejects: list[SpanReject], source: str, position: tuple[str, int, int] | None = None) -> None:
        for r in rejects:
            headers = [(H_REASON, r.reason.encode()), (H_DETAIL, r.detail[:1000].encode())]
            if position is not None:
                headers += [
                    (H_SRC_TOPIC, position[0].encode()),
                    (H_SRC_PARTITION, str(position[1]).encode()),
                    (H_SRC_OFFSET, str(position[2]).encode()),
                ]
            value = orjson.dumps({"source": source, **r.record()})
            self.gp._producer.send(self.deadletter_topic, key=None, value=value, headers=headers)

    def flush(self) -> None:
        self.gp.flush()

    def close(self) -> None:
        self.gp.close()


# --- the receiver ----------------------------------------------------------------------------------


class OtlpReceiver:
    """OTLP/HTTP trace receiver: POST /v1/traces (application/x-protobuf or application/json, gzip ok),
    GET /health and /counters. Answers with ExportTraceServiceResponse, partial_success naming rejects."""

    def __init__(self, settings: Settings, output: Any) -> None:
        self.settings = settings
        self.mapper = SpanMapper(settings.otlp, make_fingerprinter(settings.detection))
        self.output = output
        self.counters: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._runner: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self.port: int | None = None

    def handle(self, body: bytes, content_type: str) -> Mapped:
        encoding = "otlp_json" if "json" in content_type else "otlp_proto"
        with self._lock:
            out = self.mapper.map_payload(body, encoding)
            self.output.events(out.events)
            if out.rejects:
                self.output.rejects(out.rejects, "otlp-http")
            self.counters["requests"] += 1
            self.counters["spans.mapped"] += len(out.events) // 2
            self.counters["spans.skipped"] += sum(out.skipped.values())
            self.counters.update(f"rejects.{r.reason}" for r in out.rejects)
        return out

    def _app(self) -> Any:
        from aiohttp import web

        limit = self.settings.otlp.max_body_bytes

        async def traces(request: web.Request) -> web.Response:
            if request.content_length is not None and request.content_length > limit:
                self.counters["rejects.oversized"] += 1
                return web.Response(status=413, text=f"body larger than {limit} bytes")
            # aiohttp inflates Content-Encoding gzip/deflate itself, and refuses (413) a body that inflates
            # beyond client_max_size: a compression bomb never reaches the mapper.
            try:
                body = await request.read()
            except web.HTTPRequestEntityTooLarge:
                self.counters["rejects.oversized"] += 1
                raise
            ctype = request.content_type or "application/x-protobuf"
            out = self.handle(body, ctype)
            whole = [r for r in out.rejects if not r.span_id]
            if whole:  # the payload itself was not OTLP: the client should know, not retry
                log.warning("OTLP payload rejected: %s: %s", whole[0].reason, whole[0].detail)
                return web.Response(status=400, text=f"{whole[0].reason}: {whole[0].detail}")
            msg = "; ".join(sorted({f"{r.reason}: {r.detail}" for r in out.rejects}))[:1000]
            if "json" in ctype:
                payload: dict[str, Any] = {}
                if out.rejects:
                    payload["partialSuccess"] = {"rejectedSpans": str(len(out.rejects)), "errorMessage": msg}
                return web.Response(body=orjson.dumps(payload), content_type="application/json")
            from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

            resp = ExportTraceServiceResponse()
            if out.rejects:
                resp.partial_success.rejected_spans = len(out.rejects)
                resp.partial_success.error_message = msg
            return web.Response(body=resp.SerializeToString(), content_type="application/x-protobuf")

        async def health(_: web.Request) -> web.Response:
            return web.Response(text="ok")

        async def counters(_: web.Request) -> web.Response:
            data = {**self.counters, **{f"mapper.{k}": v for k, v in self.mapper.counters.items()}}
            return web.Response(body=orjson.dumps(data), content_type="application/json")

        app = web.Application(client_max_size=limit + 1024)
        app.router.add_post("/v1/traces", traces)
        app.router.add_get("/health", health)
        app.router.add_get("/counters", counters)
        return app

    async def start_async(self, bind: str | None = None, port: int | None = None) -> int:
        from aiohttp import web

        self._runner = web.AppRunner(self._app(), access_log=None)
        await self._runner.setup()
        site = web.TCPSite(
            self._runner,
            bind or self.settings.otlp.bind,
            self.settings.otlp.port if port is None else port,
        )
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self.port

    async def stop_async(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def start_in_thread(self, port: int = 0) -> int:
        """For tests and embedding: serve on a background thread; port 0 picks a free one."""
        ready = threading.Event()

        def main() -> None:
            self._loop = asyncio.new_event_loop()
            self._loop.run_until_complete(self.start_async(port=port))
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=main, name="otlp-receiver", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("OTLP receiver did not start")
        assert self.port is not None
        return self.port

    def stop_thread(self) -> None:
        if self._loop is None:
            return
        asyncio.run_coroutine_threadsafe(self.stop_async(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)


# --- Kafka bridge: the Collector's topic -> crosstalk's input topic ------------------------------------


def bridge_kafka(
    settings: Settings,
    *,
    max_messages: int | None = None,
    idle_exit_s: float | None = None,
    stop: threading.Event | None = None,
) -> Counter[str]:
    """Consume the Collector Kafka exporter's topic, publish mapped events; commit after publishing.

    At least once: after a crash, messages since the last commit are mapped again, giving the same
    event ids (derived from the request id), which the workers drop as duplicates."""
    import time

    from kafka import KafkaConsumer

    o = settings.otlp
    consumer = KafkaConsumer(
        o.kafka_topic,
        bootstrap_servers=settings.kafka.bootstrap.split(","),
        group_id=o.kafka_group_id,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        max_partition_fetch_bytes=settings.kafka.max_message_bytes,
    )
    mapper = SpanMapper(o, make_fingerprinter(settings.detection))
    output = KafkaOutput(settings)
    counts: Counter[str] = Counter()
    last = time.monotonic()
    try:
        while (max_messages is None or counts["messages"] < max_messages) and not (stop and stop.is_set()):
            batch = consumer.poll(timeout_ms=500)
            if not batch:
                if idle_exit_s is not None and time.monotonic() - last > idle_exit_s:
                    break
                continue
            last = time.monotonic()
            for tp, records in batch.items():
                for rec in records:
                    counts["messages"] += 1
                    out = mapper.map_payload(rec.value or b"", o.kafka_encoding)
                    output.events(out.events)
                    counts["events"] += len(out.events)
                    counts["skipped"] += sum(out.skipped.values())
                    if out.rejects:
                        counts.update(f"rejects.{r.reason}" for r in out.rejects)
                        output.rejects(out.rejects, "otlp-kafka", (tp.topic, tp.partition, rec.offset))
            output.flush()
            consumer.commit()
    finally:
        output.close()
        consumer.close()
    return counts


# --- the command ------------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--to", choices=["embedded", "kafka", "jsonl"], default="embedded")
    parser.add_argument("--port", type=int, help="OTLP/HTTP port (default: otlp.port, 14318)")
    parser.add_argument("--bind", help="address (default: otlp.bind, 127.0.0.1)")
    parser.add_argument("--from-kafka", action="store_true", help="read the Collector's Kafka topic (otlp.kafka_topic)")
    parser.add_argument("--events-out", help="--to jsonl: events file (default: stdout)")
    parser.add_argument("--alerts-out", help="--to embedded: alerts as JSONL (default: stdout)")
    parser.add_argument("--rejects", default="crosstalk-otlp-rejects.jsonl", help="unmappable spans (not --to kafka)")


def run(args: argparse.Namespace) -> int:
    from streams.cli.main import LazyFile

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    settings = load_settings(getattr(args, "config", None))
    # Fingerprints that leave this process must be made with the key the workers use.
    keyed = with_run_key if args.to == "embedded" else require_fingerprint_key
    settings = keyed(settings, "otlp")
    if args.from_kafka:
        if args.to != "kafka":
            raise SystemExit("crosstalk otlp --from-kafka: use --to kafka (the workers detect)")
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())  # finish the batch in hand, commit, close
        o = settings.otlp
        log.info("bridging %s (%s) -> %s", o.kafka_topic, o.kafka_encoding, settings.kafka.input_topic)
        counts = bridge_kafka(settings, stop=stop)
        log.info("bridge stopped: %s", dict(counts))
        return 0
    rejects = LazyFile(args.rejects)
    output: Any
    out_file: Any = None
    if args.to == "kafka":
        output = KafkaOutput(settings)
    elif args.to == "jsonl":
        out_file = sys.stdout.buffer if args.events_out in (None, "-") else open(args.events_out, "ab")  # noqa: SIM115
        output = JsonlOutput(out_file, rejects)
    else:
        out_file = sys.stdout.buffer if args.alerts_out in (None, "-") else open(args.alerts_out, "ab")  # noqa: SIM115
        output = EmbeddedOutput(settings, out_file, rejects)
    receiver = OtlpReceiver(settings, output)

    async def main() -> None:
        port = await receiver.start_async(args.bind, args.port)
        log.info("OTLP/HTTP receiver on http://%s:%d/v1/traces -> %s", args.bind or settings.otlp.bind, port, args.to)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        await receiver.stop_async()

    try:
        asyncio.run(main())
    finally:
        output.close()
        rejects.close()
        if out_file is not None and out_file is not sys.stdout.buffer:
            out_file.close()
    log.info("stopped: %s", dict(receiver.counters))
    return 0
