"""Where the probe's request/response/canary events go: a JSONL file, stdout (a pipeline's stdin),
the Kafka input topic (through the gateway producer library), or a callback (the live demo).

Every event is validated against the wire contract before it leaves; one that fails is counted and
reported, never sent half-right. Prompts leave as keyed fingerprints only; outputs leave as text,
because the monitor's canary scan reads words (they are short: at most `max_output_tokens`).
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, Protocol

import orjson

from schemas.events import EventError, parse_event
from streams.settings import Settings


class EventSink(Protocol):
    def send(self, event: dict[str, Any]) -> None: ...
    def close(self) -> None: ...


class Validated:
    """Validates each event, then hands it on; counts what went out and what was refused."""

    def __init__(self, inner: EventSink, settings: Settings) -> None:
        self.inner = inner
        self.max_bytes = settings.ingest.max_event_bytes
        self.counts: Counter[str] = Counter()

    def send(self, event: dict[str, Any]) -> None:
        try:
            parse_event(orjson.dumps(event), max_bytes=self.max_bytes)
        except EventError as exc:
            self.counts[f"invalid:{exc.reason}"] += 1
            print(f"crosstalk probe: event not sent ({exc.reason}): {exc.detail[:200]}", file=sys.stderr)
            return
        self.inner.send(event)
        self.counts[event["type"]] += 1

    def close(self) -> None:
        self.inner.close()


class JsonlSink:
    def __init__(self, path: str) -> None:
        self._own = path != "-"
        if self._own:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._fh: IO[bytes] = Path(path).open("ab") if self._own else sys.stdout.buffer  # noqa: SIM115

    def send(self, event: dict[str, Any]) -> None:
        self._fh.write(orjson.dumps(event) + b"\n")
        self._fh.flush()  # a pipeline reading our stdout sees each probe as it happens

    def close(self) -> None:
        if self._own:
            self._fh.close()
        else:
            self._fh.flush()


class KafkaSink:
    def __init__(self, settings: Settings, *, send_text: bool = True) -> None:
        from streams.producer import GatewayProducer

        # The prober's default (send_text): its prompt is already a fingerprint, and the output's words feed
        # the canary scan. A gateway's (the test engine's) traffic is fingerprinted at the edge instead.
        self._gp = GatewayProducer(settings, send_text=send_text)

    def send(self, event: dict[str, Any]) -> None:
        self._gp.publish(event)

    def close(self) -> None:
        self._gp.flush()
        self._gp.close()


class CallbackSink:
    def __init__(self, fn: Callable[[dict[str, Any]], None]) -> None:
        self.fn = fn

    def send(self, event: dict[str, Any]) -> None:
        self.fn(event)

    def close(self) -> None:
        return None


class NullSink:
    def send(self, event: dict[str, Any]) -> None:
        return None

    def close(self) -> None:
        return None
