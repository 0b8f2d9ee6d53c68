"""The outputs of the OTLP input, and the bridge from the OpenTelemetry Collector's Kafka exporter topic.

Spans mapped by streams.inputs.otlp (text fingerprinted at once) go to one output: `JsonlOutput` (an
events file, for `crosstalk replay` later) or `KafkaOutput` (crosstalk's input topic; unmappable spans to
the dead-letter topic); the embedded runner's is streams.embedded.output. `bridge_kafka` reads the
Collector's topic (encodings otlp_proto and otlp_json) into the input topic. The command that wires a
receiver or the bridge to its output is `crosstalk otlp` (streams/cli/otlp.py).
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from typing import Any

import orjson

from detectors.monitor import make_fingerprinter
from schemas.events import Event
from streams.inputs.otlp import Mapped, SpanMapper, SpanReject
from streams.inputs.otlp_receiver import OtlpReceiver
from streams.settings import Settings
from streams.sinks.base import ByteOut

__all__ = ["JsonlOutput", "KafkaOutput", "OtlpReceiver", "bridge_kafka"]

log = logging.getLogger("crosstalk.otlp")

H_REASON = "x-crosstalk-reason"  # the dead-letter headers of the workers (streams/kafka/app.py)
H_DETAIL = "x-crosstalk-detail"
H_SRC_TOPIC = "x-crosstalk-source-topic"
H_SRC_PARTITION = "x-crosstalk-source-partition"
H_SRC_OFFSET = "x-crosstalk-source-offset"


# --- outputs ---------------------------------------------------------------------------------------


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
    event ids (derived from the request id), which the workers drop as duplicates. The topics must exist:
    `crosstalk otlp --from-kafka` creates them first (streams.kafka.topics.ensure_bridge_topics; an input
    does not import the runners' rooms)."""
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
