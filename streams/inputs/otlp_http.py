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
from streams.inputs.otlp_auth import UnsafeBind, check_bind
from streams.inputs.otlp_receiver import OtlpReceiver
from streams.settings import Settings, load_settings, require_fingerprint_key, with_run_key
from streams.sinks.base import ByteOut

__all__ = ["EmbeddedOutput", "JsonlOutput", "KafkaOutput", "OtlpReceiver", "bridge_kafka"]

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

    def events(self, events: list[Event]) -> list[SpanReject]:
        """Feed the core; returns what it refused (future_ts, duplicate, canary_tenant, ...), by span, so
        that the sender hears of it in partial_success (the rejects file has it too)."""
        refused: list[SpanReject] = []
        for ev in sorted(events, key=lambda e: e.ts):
            why = self.runner.feed_checked(ev, "otlp")
            if why is not None:
                trace_id, _, span_id = (ev.traceparent or "")[3:-3].rpartition("-")  # 00-<trace>-<span>-01
                refused.append(SpanReject(why[0], why[1], trace_id, span_id))
        return refused

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

    def events(self, events: list[Event]) -> list[SpanReject]:
        for ev in events:
            self.out.write(ev.model_dump_json(exclude_none=True).encode() + b"\n")
        self.out.flush()
        return []  # judged later, by whoever replays the file

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

    def events(self, events: list[Event]) -> list[SpanReject]:
        for ev in events:
            self.gp.publish(ev)
        return []  # the workers judge them (and dead-letter what they refuse)

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


# --- Kafka bridge: the Collector's topic -> crosstalk's input topic ------------------------------------


def _map_record(mapper: SpanMapper, value: bytes, encoding: str) -> Mapped:
    """A record's spans; whatever a record holds, it becomes events and dead letters, never a crash: a
    bridge that died on a record before committing would meet it again on every restart."""
    try:
        return mapper.map_payload(value, encoding)
    except Exception as exc:  # the mapping already turns every known failure into a reject; this is a bug
        log.exception("OTLP record could not be mapped")
        return Mapped(rejects=[SpanReject("internal_error", f"{type(exc).__name__} while mapping the record")])


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

    from streams.kafka.topics import ensure_bridge_topics

    o = settings.otlp
    created = ensure_bridge_topics(settings)  # TopicsUnavailable: one clear error, not a log line per poll
    log.info("topics: %s", ", ".join(f"{name} {how}" for name, how in sorted(created.items())))
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
                    out = _map_record(mapper, rec.value or b"", o.kafka_encoding)
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
    parser.add_argument(
        "--selftest",
        nargs="?",
        const="",
        dest="selftest_url",
        metavar="URL",
        help="send one GenAI span to a running receiver (default: $OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else "
        "this receiver's address) and say what arrived (streams/inputs/otlp_selftest.py)",
    )
    parser.add_argument("--counters-url", help="--selftest through a Collector: crosstalk's /counters URL")


def run(args: argparse.Namespace) -> int:
    from streams.cli.main import EXIT_CONFIG, CliError, LazyFile

    if getattr(args, "selftest_url", None) is not None:
        from streams.inputs.otlp_selftest import selftest_main

        return selftest_main(args, load_settings(getattr(args, "config", None)))
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
        from streams.kafka.topics import TopicsUnavailable

        try:
            counts = bridge_kafka(settings, stop=stop)
        except TopicsUnavailable as exc:
            log.error("crosstalk otlp --from-kafka: %s", exc)
            return 1
        log.info("bridge stopped: %s", dict(counts))
        return 0
    bind = args.bind or settings.otlp.bind
    try:  # before any output is opened: a refused start leaves nothing behind
        check_bind(settings, bind, settings.otlp.port if args.port is None else args.port)
    except UnsafeBind as exc:
        raise CliError(EXIT_CONFIG, str(exc)) from None
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
        log.info("OTLP/HTTP receiver on http://%s:%d/v1/traces -> %s", bind, port, args.to)
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
