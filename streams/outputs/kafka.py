"""Events to crosstalk's Kafka input topic, through the gateway producer library (keyed by cache domain, the
traceparent as a header); dead letters to the dead-letter topic with the reason in headers, never the input itself
(a span may carry message text: the original stays where it came from, named by `position`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from streams.outputs.base import Letter, Output, Produced, Refused
from streams.routing import H_DETAIL, H_REASON, H_SRC_OFFSET, H_SRC_PARTITION, H_SRC_TOPIC
from streams.settings import Settings


class KafkaOutput(Output):
    """`producer`: a KafkaProducer to share (one per process). Text is fingerprinted here, at the edge, and never
    leaves (the privacy default); `send_text` keeps the outputs' text instead (only the prober's: its outputs are
    short, and their words feed the canary scan)."""

    def __init__(self, settings: Settings, producer: Any = None, *, send_text: bool = False) -> None:
        from streams.producer import GatewayProducer

        self.gp = GatewayProducer(settings, producer=producer, send_text=send_text)
        self.deadletter_topic = settings.kafka.deadletter_topic

    @property
    def producer(self) -> Any:
        """The Kafka client, for a topic of the caller's own beside the input (the scraper's limits topic)."""
        return self.gp._producer

    def send(self, events: Sequence[Produced]) -> list[Refused]:
        publish = self.gp.publish
        for ev in events:
            publish(ev)
        return []  # the workers judge them (and dead-letter what they refuse)

    def dead_letter(self, letter: Letter) -> None:
        headers = [(H_REASON, letter.reason.encode()), (H_DETAIL, letter.detail[:1000].encode())]
        position = letter.position
        if position is not None:
            headers += [
                (H_SRC_TOPIC, position[0].encode()),
                (H_SRC_PARTITION, str(position[1]).encode()),
                (H_SRC_OFFSET, str(position[2]).encode()),
            ]
        value = orjson.dumps({"source": letter.source, **letter.record})
        self.producer.send(self.deadletter_topic, key=None, value=value, headers=headers)

    def flush(self) -> None:
        self.gp.flush()

    def close(self) -> None:
        self.gp.close()  # gives up the requests it holds for a domain, flushes, closes
