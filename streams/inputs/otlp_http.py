"""The bridge from the OpenTelemetry Collector's Kafka exporter topic, and the OTLP input's outputs.

Spans mapped by streams.inputs.otlp (text fingerprinted at once) go to one output (streams/outputs/): a JSON Lines
events file, for `crosstalk replay` later, or crosstalk's input topic (unmappable spans to the dead-letter topic); the
embedded runner's is streams.embedded.output. `bridge_kafka` reads the Collector's topic (encodings otlp_proto and
otlp_json) into the input topic. The command that wires a receiver or the bridge to its output is `crosstalk otlp`
(streams/cli/otlp.py).
"""

from __future__ import annotations

import logging
import threading
from collections import Counter

from detectors.monitor import make_fingerprinter
from streams.inputs.otlp import Mapped, SpanMapper, SpanReject
from streams.inputs.otlp_receiver import OtlpReceiver
from streams.outputs import KafkaOutput, Letter
from streams.settings import Settings

__all__ = ["OtlpReceiver", "bridge_kafka"]

log = logging.getLogger("crosstalk.otlp")

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
                    output.send(out.events)
                    counts["events"] += len(out.events)
                    counts["skipped"] += sum(out.skipped.values())
                    if out.rejects:
                        counts.update(f"rejects.{r.reason}" for r in out.rejects)
                        position = (tp.topic, tp.partition, rec.offset)
                        for r in out.rejects:
                            output.dead_letter(Letter("otlp-kafka", r.record(), r.reason, r.detail, position))
            output.flush()
            consumer.commit()
    finally:
        output.close()
        consumer.close()
    return counts
