"""The embedded runner as a live output: events handed over as they arrive (`crosstalk otlp --to embedded`).

The OTLP receiver (streams.inputs.otlp_receiver) hands each batch of mapped events to an output and hears
back which spans were refused; this output feeds them to the detectors in this process and writes the
alerts as JSON Lines. The command (streams/cli/otlp.py) builds it and hands it to the receiver.
"""

from __future__ import annotations

import time

import orjson

from schemas.events import Event
from streams.embedded.runner import EmbeddedRunner
from streams.inputs.otlp import SpanReject
from streams.settings import Settings
from streams.sinks import build_sinks
from streams.sinks.base import ByteOut
from streams.sinks.jsonl import AlertWriter


class EmbeddedOutput:
    """Detect in-process: the embedded runner's core, fed as spans arrive (live traffic is in time order)."""

    def __init__(self, settings: Settings, alerts_out: ByteOut | None, rejects_out: ByteOut | None) -> None:
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
        self.runner.finish(time.perf_counter())
