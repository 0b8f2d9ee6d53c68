"""The embedded runner as a live output: events handed over as they arrive (`crosstalk otlp --to embedded`).

The OTLP receiver (streams.inputs.otlp_receiver) hands each batch of mapped events to an output and hears
back which spans were refused; this output feeds them to the detectors in this process and writes the
alerts as JSON Lines. The command (streams/cli/otlp.py) builds it and hands it to the receiver.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence

import orjson
from pydantic import BaseModel

from schemas.events import Event, parse_event
from streams.embedded.runner import EmbeddedRunner
from streams.outputs.base import Letter, Output, Produced, Refused
from streams.settings import Settings
from streams.sinks import build_sinks
from streams.sinks.base import ByteOut
from streams.sinks.jsonl import AlertWriter

_IDS = ("type", "event_id", "request_id", "tenant_id", "cache_domain", "traceparent")


def text_free_evidence(event: Event) -> bytes:
    """What the rejects file keeps of an event the core refused: its ids, and of the whole event (prompt
    text or fingerprints, canary markers) only its size and SHA-256 -- a live producer's rejects keep no
    text and no marker (issue 42: a refused OTLP span's reject kept its canary marker)."""
    whole = event.model_dump_json().encode()
    ids = {k: v for k in _IDS if (v := getattr(event, k, None)) is not None}
    return orjson.dumps({**ids, "withheld_bytes": len(whole), "sha256": hashlib.sha256(whole).hexdigest()})


class EmbeddedOutput(Output):
    """Detect in-process: the embedded runner's core, fed as spans arrive (live traffic is in time order)."""

    def __init__(self, settings: Settings, alerts_out: ByteOut | None, rejects_out: ByteOut | None) -> None:
        if settings.otlp.tokens:  # request ids are <sender>/<id>: the core judges content across senders as such
            scoped = settings.detection.model_copy(update={"scoped_request_ids": True})
            settings = settings.model_copy(update={"detection": scoped})
        self.runner = EmbeddedRunner(settings, [AlertWriter(alerts_out), *build_sinks(settings)], rejects_out)
        self.alerts = self.runner.result.alerts
        self.runner.evidence = text_free_evidence

    def send(self, events: Sequence[Produced]) -> list[Refused]:
        """Feed the core; returns what it refused (future_ts, duplicate, canary_tenant, ...), so that the sender
        hears of it (OTLP: partial_success); the rejects file has it too."""
        refused: list[Refused] = []
        models = [ev if isinstance(ev, BaseModel) else parse_event(orjson.dumps(ev)) for ev in events]
        for ev in sorted(models, key=lambda e: e.ts):
            why = self.runner.feed_checked(ev, "otlp")
            if why is not None:
                refused.append(Refused(ev, why[0], why[1]))
        return refused

    def tick(self, now: float) -> None:
        self.runner.tick(now)

    def state_size(self) -> dict[str, int]:
        return self.runner.monitor.state_size()

    def dead_letter(self, letter: Letter) -> None:
        self.runner.reject(letter.source, None, letter.reason, letter.detail, orjson.dumps(dict(letter.record)))

    def close(self) -> None:
        self.runner.finish(time.perf_counter())
