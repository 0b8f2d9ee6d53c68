"""An output that checks every event against the wire contract before it leaves: one that fails is counted and
reported on stderr, never sent half-right (the prober's and the test engine's)."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Sequence

import orjson
from pydantic import BaseModel

from schemas.events import EventError, parse_event
from streams.outputs.base import Output, Produced, Refused
from streams.settings import Settings


class ValidatedOutput(Output):
    """Validates each event, then hands the valid ones to `inner`; `counts`: what went out by type, and what was
    refused as `invalid:<reason>`."""

    def __init__(self, inner: Output, settings: Settings, name: str = "crosstalk probe") -> None:
        self.inner = inner
        self.max_bytes = settings.ingest.max_event_bytes
        self.name = name
        self.counts: Counter[str] = Counter()

    def send(self, events: Sequence[Produced]) -> list[Refused]:
        valid = []
        for ev in events:
            raw = ev.model_dump_json().encode() if isinstance(ev, BaseModel) else orjson.dumps(ev)
            try:
                parse_event(raw, max_bytes=self.max_bytes)
            except EventError as exc:
                self.counts[f"invalid:{exc.reason}"] += 1
                print(f"{self.name}: event not sent ({exc.reason}): {exc.detail[:200]}", file=sys.stderr)
                continue
            valid.append(ev)
        refused = self.inner.send(valid) if valid else []
        for ev in valid:
            self.counts[ev.type if isinstance(ev, BaseModel) else ev["type"]] += 1
        return refused

    def flush(self) -> None:
        self.inner.flush()

    def close(self) -> None:
        self.inner.close()
