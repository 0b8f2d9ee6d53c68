"""OpenTelemetry sink: a GenAI `chat` span per exchange, a span per alert, and crosstalk metrics.

Spans carry event time (request ts → response ts), not processing time, so a replayed file lands
where the traffic happened, and they continue the producer's W3C `traceparent`: an operator who
opens the gateway's trace sees crosstalk's view of the same call, and the alert span links back to it.

The sink owns its TracerProvider and MeterProvider rather than installing global ones: embedding
crosstalk must not hijack the host process's telemetry.

Export never slows detection: spans and metrics leave on the SDK's background threads (bounded
queue, short per-export timeout), close() never exports on the caller's thread and waits at most
`otel.shutdown_timeout_s`, and every batch that could not be exported is counted (`export_stats`,
the `crosstalk.telemetry.dropped` counter and one warning at close), never lost silently.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.metrics import CallbackOptions, Meter, Observation
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    ConsoleMetricExporter,
    MetricExporter,
    MetricReader,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
from opentelemetry.trace import Link, Span, SpanContext, SpanKind
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.util.types import AttributeValue

from schemas.alert import Alert, IncidentResolved
from schemas.exchange import Exchange
from streams.redact import protect_client_logs, redact_url
from streams.settings import OtelSettings
from streams.sinks.base import Sink, SizeSource
from streams.sinks.otel_export import CountedMetrics, CountedSpans, ExportStats

log = logging.getLogger(__name__)
protect_client_logs()

_PROPAGATOR = TraceContextTextMapPropagator()
_NS = 1_000_000_000
# Detection latency runs from milliseconds (live) to hours (replays of old files).
_LATENCY_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 3600)


def _ns(ts: float) -> int:
    return round(ts * _NS)


def parent_context(traceparent: str | None) -> Context | None:
    """The producer's W3C trace context as a parent, or None (new trace) when absent or invalid."""
    if not traceparent:
        return None
    ctx = _PROPAGATOR.extract({"traceparent": traceparent})
    span_ctx = trace.get_current_span(ctx).get_span_context()
    return ctx if span_ctx.is_valid else None


@dataclass
class _Open:
    span: Span
    end_ns: int
    event_ts: float
    alert_ids: set[str] = field(default_factory=set)


class OtelSink(Sink):
    """Sink exporting traces and metrics over OTLP/HTTP (and/or console).

    Runner: `OtelSink(settings.otel)` when `settings.otel.enabled or settings.otel.console`; pass it as
    `metrics=` to WebhookSink. Runners call `on_event(type)` per input event, `set_state_size_source(fn)`
    and `set_lag_source(fn)` once, as for every Sink. Tests inject exporters/readers instead of the endpoint.
    """

    def __init__(
        self,
        settings: OtelSettings,
        *,
        span_exporter: SpanExporter | None = None,
        metric_readers: Iterable[MetricReader] | None = None,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.wall_clock = wall_clock
        self.export_stats = ExportStats(redact_url(settings.endpoint))
        self.close_report: dict[str, Any] = {}
        resource = Resource.create({"service.name": settings.service_name})
        # No atexit hooks: an exit must not wait on a collector either; close() bounds the wait.
        self.tracer_provider = TracerProvider(resource=resource, shutdown_on_exit=False)
        self._span_exporters = self._traces(span_exporter)
        self.tracer = self.tracer_provider.get_tracer("crosstalk")
        self._metric_exporters: list[CountedMetrics] = []
        readers = self._readers(metric_readers)
        self.meter_provider = MeterProvider(resource=resource, metric_readers=readers, shutdown_on_exit=False)
        self._state_source: SizeSource | None = None
        self._lag_source: SizeSource | None = None
        self._behind_source: Callable[[], float | None] | None = None
        self._instruments(self.meter_provider.get_meter("crosstalk"))

        # The runner thread calls on_*; the webhook threads call the metrics hooks (counters are
        # thread-safe); the lock guards the span bookkeeping only.
        self._lock = threading.Lock()
        self._open: OrderedDict[str, _Open] = OrderedDict()
        self._done: OrderedDict[str, SpanContext] = OrderedDict()  # request_id -> ended exchange span
        self._seen_alerts: OrderedDict[str, None] = OrderedDict()
        self._event_clock = 0.0
        self._closed = False

    def _endpoint(self, signal: str) -> tuple[str, dict[str, str]]:
        s = self.settings
        return f"{s.endpoint.rstrip('/')}/v1/{signal}", {k: v.get_secret_value() for k, v in s.headers.items()}

    def _traces(self, span_exporter: SpanExporter | None) -> list[CountedSpans]:
        """The span exporters (injected, OTLP and/or console), each counted and behind its batch processor."""
        settings = self.settings
        exporters: list[SpanExporter] = []
        if settings.traces:
            if span_exporter is not None:
                exporters.append(span_exporter)
            elif settings.enabled:
                from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

                url, headers = self._endpoint("traces")
                exporters.append(OTLPSpanExporter(endpoint=url, headers=headers, timeout=settings.timeout_s))
            if settings.console:
                exporters.append(ConsoleSpanExporter())
        counted = [CountedSpans(exp, self.export_stats) for exp in exporters]
        for exp in counted:
            # A file replay produces thousands of spans per second; the default 2048-span queue
            # would drop some whenever one export is slow.
            self.tracer_provider.add_span_processor(
                BatchSpanProcessor(
                    exp,
                    max_queue_size=settings.max_queue_spans,
                    schedule_delay_millis=1000,
                    export_timeout_millis=settings.timeout_s * 1000,
                )
            )
        return counted

    def _readers(self, metric_readers: Iterable[MetricReader] | None) -> list[MetricReader]:
        """The metric readers: injected ones, else periodic readers over counted OTLP and/or console exporters."""
        settings = self.settings
        readers: list[MetricReader] = list(metric_readers or [])
        metric_exporters: list[MetricExporter] = []
        if settings.metrics and metric_readers is None and settings.enabled:
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

            url, headers = self._endpoint("metrics")
            metric_exporters.append(OTLPMetricExporter(endpoint=url, headers=headers, timeout=settings.timeout_s))
        if settings.metrics and settings.console:
            metric_exporters.append(ConsoleMetricExporter())
        for mexp in metric_exporters:
            counted = CountedMetrics(mexp, self.export_stats)
            self._metric_exporters.append(counted)
            readers.append(
                PeriodicExportingMetricReader(
                    counted,
                    export_interval_millis=settings.export_interval_s * 1000,
                    export_timeout_millis=settings.timeout_s * 1000,
                )
            )
        return readers

    def _instruments(self, meter: Meter) -> None:
        """crosstalk's counters, histogram and observable gauges on `meter`."""
        self._events = meter.create_counter("crosstalk.events", unit="{event}", description="input events by type")
        self._rejects = meter.create_counter(
            "crosstalk.rejects", unit="{event}", description="rejected input by reason"
        )
        self._alerts = meter.create_counter("crosstalk.alerts", unit="{alert}", description="alerts by kind, severity")
        self._latency = meter.create_histogram(
            "crosstalk.detection.latency",
            unit="s",
            description="event time of the response to wall-clock emission of the alert",
            explicit_bucket_boundaries_advisory=_LATENCY_BUCKETS,
        )
        self._deliveries = meter.create_counter(
            "crosstalk.webhook.deliveries", unit="{notification}", description="webhook notifications by outcome"
        )
        self._resolved = meter.create_counter(
            "crosstalk.incidents.resolved", unit="{incident}", description="incidents the core resolved"
        )
        self._failures = meter.create_counter(
            "crosstalk.webhook.failures", unit="{attempt}", description="failed webhook attempts by reason"
        )
        meter.create_observable_counter(
            "crosstalk.telemetry.dropped",
            callbacks=[self._observe_dropped],
            unit="{batch}",
            description="span and metric batches the exporters could not deliver (collector down or slow)",
        )
        meter.create_observable_gauge(
            "crosstalk.state.size",
            callbacks=[self._observe_state],
            unit="{entry}",
            description="entries held in detector state",
        )
        meter.create_observable_gauge(
            "crosstalk.consumer.lag",
            callbacks=[self._observe_lag],
            unit="{message}",
            description="input messages not yet consumed",
        )
        meter.create_observable_gauge(
            "crosstalk.event_time.behind",
            callbacks=[self._observe_behind],
            unit="s",
            description="how far the worker's event time trails the wall clock (growing: it cannot keep up)",
        )

    # -- gauges

    def set_state_size_source(self, fn: SizeSource) -> None:
        """`fn()` → total entries, or {component: entries}; read at each metrics export."""
        self._state_source = fn

    def set_lag_source(self, fn: SizeSource) -> None:
        """`fn()` → total lag, or {partition: lag}; read at each metrics export."""
        self._lag_source = fn

    def set_behind_source(self, fn: Callable[[], float | None]) -> None:
        """`fn()` → seconds behind the wall clock, or None before any event; read at each metrics export."""
        self._behind_source = fn

    def _observe_behind(self, options: CallbackOptions) -> list[Observation]:
        fn = self._behind_source
        try:
            value = fn() if fn is not None else None
        except Exception:  # a failing callback must not break the whole export
            log.exception("otel gauge source event_time.behind failed")
            return []
        return [] if value is None else [Observation(value)]

    @staticmethod
    def _observe(fn: SizeSource | None, attr: str) -> list[Observation]:
        if fn is None:
            return []
        try:
            value = fn()
        except Exception:  # a failing callback must not break the whole export
            log.exception("otel gauge source %s failed", attr)
            return []
        if isinstance(value, Mapping):
            return [Observation(v, {attr: str(k)}) for k, v in value.items()]
        return [Observation(value)]

    def _observe_dropped(self, options: CallbackOptions) -> list[Observation]:
        return [
            Observation(self.export_stats.get(f"{signal}_batches_dropped"), {"signal": signal})
            for signal in ("span", "metric")
        ]

    def _observe_state(self, options: CallbackOptions) -> list[Observation]:
        return self._observe(self._state_source, "crosstalk.component")

    def _observe_lag(self, options: CallbackOptions) -> list[Observation]:
        return self._observe(self._lag_source, "messaging.destination.partition.id")

    # -- metrics hooks

    def on_event(self, type: str) -> None:
        self._events.add(1, {"type": type})

    def on_webhook_delivery(self, receiver: str, outcome: str) -> None:
        self._deliveries.add(1, {"receiver": receiver, "outcome": outcome})

    def on_webhook_failure(self, receiver: str, reason: str) -> None:
        self._failures.add(1, {"receiver": receiver, "reason": reason})

    # -- spans

    def _exchange_attributes(self, ex: Exchange) -> dict[str, AttributeValue]:
        req, resp = ex.request, ex.response
        source = resp or req
        model = source.model if source is not None else ""
        attrs: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": model,
            "crosstalk.request_id": ex.request_id,
            "crosstalk.tenant_id": ex.tenant_id,
        }
        if ex.session_id:
            attrs["gen_ai.conversation.id"] = ex.session_id
        if ex.cache_domain:
            attrs["crosstalk.cache_domain"] = ex.cache_domain
        if req is not None:
            attrs["crosstalk.prompt_tokens"] = req.prompt_tokens
            if req.max_output_tokens is not None:
                attrs["gen_ai.request.max_tokens"] = req.max_output_tokens
        if resp is not None:
            attrs["gen_ai.response.model"] = resp.model
            attrs["http.response.status_code"] = resp.status_code
            if resp.finish_reason:
                attrs["gen_ai.response.finish_reasons"] = [resp.finish_reason]
            if resp.usage is not None:
                if resp.usage.input_tokens is not None:
                    attrs["gen_ai.usage.input_tokens"] = resp.usage.input_tokens
                if resp.usage.output_tokens is not None:
                    attrs["gen_ai.usage.output_tokens"] = resp.usage.output_tokens
            if resp.ttft_ms is not None:
                attrs["crosstalk.ttft_ms"] = resp.ttft_ms
        if ex.orphan:
            attrs["crosstalk.orphan"] = ex.orphan
        if ex.canary_hits:
            attrs["crosstalk.canary_hits"] = len(ex.canary_hits)
        return attrs

    @staticmethod
    def _alert_attributes(alert: Alert) -> dict[str, AttributeValue]:
        attrs: dict[str, AttributeValue] = {
            "crosstalk.alert.id": alert.alert_id,
            "crosstalk.alert.kind": alert.kind,
            "crosstalk.alert.severity": alert.severity,
            "crosstalk.alert.score": alert.score,
            "crosstalk.cache_domain": alert.cache_domain,
            "crosstalk.incident_id": alert.incident_id,
            "crosstalk.group_key": alert.group_key,
            "crosstalk.alert.request_ids": list(alert.request_ids),
        }
        if alert.incident_severity:
            attrs["crosstalk.incident.severity"] = alert.incident_severity
        if alert.tenant_id:
            attrs["crosstalk.tenant_id"] = alert.tenant_id
        if alert.source_tenant_id:
            attrs["crosstalk.source_tenant_id"] = alert.source_tenant_id
        if alert.session_id:
            attrs["crosstalk.session_id"] = alert.session_id
        return attrs

    def _add_alert_event(self, held: _Open, alert: Alert) -> None:
        if alert.alert_id in held.alert_ids:
            return
        held.alert_ids.add(alert.alert_id)
        held.span.add_event(
            "crosstalk.alert",
            attributes={k: v for k, v in self._alert_attributes(alert).items() if k != "crosstalk.alert.request_ids"},
            # The event sits inside the span even when the alert's own time lies past its end.
            timestamp=min(_ns(alert.ts), held.end_ns),
        )

    def _end(self, request_id: str, held: _Open) -> None:
        held.span.end(end_time=held.end_ns)
        self._done[request_id] = held.span.get_span_context()
        while len(self._done) > 100_000:
            self._done.popitem(last=False)

    def _expire(self) -> None:
        # Spans are held open for span_hold_s of event time so that alerts raised a little later
        # (domain-level ones naming earlier requests) can still add their event to them.
        horizon = self._event_clock - self.settings.span_hold_s
        while self._open:
            rid, held = next(iter(self._open.items()))
            if held.event_ts > horizon and len(self._open) <= self.settings.max_open_spans:
                break
            self._open.popitem(last=False)
            self._end(rid, held)

    def _span_context(self, request_id: str) -> SpanContext | None:
        held = self._open.get(request_id)
        if held is not None:
            return held.span.get_span_context()
        return self._done.get(request_id)

    def on_exchange(self, exchange: Exchange, alerts: list[Alert]) -> None:
        req, resp = exchange.request, exchange.response
        start = req.ts if req is not None else exchange.ts
        end = resp.ts if resp is not None else exchange.ts
        source = resp or req
        model = source.model if source is not None else ""
        with self._lock:
            if self._closed:
                return
            self._event_clock = max(self._event_clock, exchange.ts)
            span = self.tracer.start_span(
                f"chat {model}".strip(),
                context=parent_context(exchange.traceparent),
                kind=SpanKind.CLIENT,
                attributes=self._exchange_attributes(exchange),
                start_time=_ns(start),
            )
            held = _Open(span, max(_ns(end), _ns(start)), exchange.ts)
            previous = self._open.pop(exchange.request_id, None)
            if previous is not None:
                self._end(exchange.request_id, previous)
            self._open[exchange.request_id] = held
            for alert in alerts:
                self._add_alert_event(held, alert)
            if self.settings.span_hold_s == 0:
                self._open.pop(exchange.request_id)
                self._end(exchange.request_id, held)
            # Alert spans right away: the exchange span context exists now, so the link is complete.
            for alert in alerts:
                self._alert_span(alert)
            self._expire()

    def _alert_span(self, alert: Alert) -> None:
        if alert.alert_id in self._seen_alerts:
            return
        self._seen_alerts[alert.alert_id] = None
        while len(self._seen_alerts) > 100_000:
            self._seen_alerts.popitem(last=False)
        for rid in alert.request_ids:
            held = self._open.get(rid)
            if held is not None:
                self._add_alert_event(held, alert)
        links = [
            Link(ctx, {"crosstalk.request_id": rid})
            for rid in dict.fromkeys(alert.request_ids)
            if (ctx := self._span_context(rid)) is not None
        ]
        span = self.tracer.start_span(
            f"crosstalk.alert {alert.kind}",
            context=Context(),  # its own trace: an alert concerns several requests' traces at once
            kind=SpanKind.INTERNAL,
            attributes=self._alert_attributes(alert),
            links=links,
            start_time=_ns(alert.ts),
        )
        span.end(end_time=_ns(alert.ts))
        self._alerts.add(1, {"kind": alert.kind, "severity": alert.severity})
        self._latency.record(max(0.0, self.wall_clock() - alert.ts), {"kind": alert.kind})

    def on_alert(self, alert: Alert) -> None:
        with self._lock:
            if self._closed:
                return
            self._event_clock = max(self._event_clock, alert.ts)
            self._alert_span(alert)

    def on_resolved(self, resolution: IncidentResolved) -> None:
        self._resolved.add(1, {"category": resolution.group_key.rpartition("category=")[2] or "exposure"})

    def on_reject(self, reason: str, detail: str) -> None:
        self._rejects.add(1, {"reason": reason})

    def close(self, timeout_s: float | None = None) -> None:
        """End held spans and shut the exporters down, waiting at most `otel.shutdown_timeout_s`.

        The last exports run on a background thread: a collector that is down or hangs costs the
        caller (a replay's end, a worker's stop) this bound, not retries times batches. What is not
        exported by then is dropped and counted.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            while self._open:
                rid, held = self._open.popitem(last=False)
                self._end(rid, held)
        bound = self.settings.shutdown_timeout_s if timeout_s is None else timeout_s

        def _shutdown() -> None:
            # Provider shutdown exports what is queued (spans) and collects once more (metrics);
            # no force_flush first: in this SDK it exports on the calling thread.
            self.tracer_provider.shutdown()
            self.meter_provider.shutdown(timeout_millis=bound * 1000)

        closer = threading.Thread(target=_shutdown, name="crosstalk-otel-shutdown", daemon=True)
        closer.start()
        closer.join(bound)
        finished = not closer.is_alive()
        if not finished:
            # Out of time: whatever the exporters are still handed is dropped (and counted) at once,
            # and the OTLP clients stop retrying.
            exporters: list[CountedSpans | CountedMetrics] = [*self._span_exporters, *self._metric_exporters]
            for exp in exporters:
                exp.abandoned = True
                try:
                    exp.shutdown()
                except Exception:
                    log.debug("exporter shutdown failed", exc_info=True)
        self.close_report = {"waited_s": bound, "finished": finished}
        stats = self.export_stats
        dropped_spans, dropped_metrics = stats.get("spans_dropped"), stats.get("metric_batches_dropped")
        if dropped_spans or dropped_metrics or not finished:
            log.warning(
                "otel: could not export %d span(s) and %d metric batch(es) to %s%s",
                dropped_spans,
                dropped_metrics,
                redact_url(self.settings.endpoint),
                ""
                if finished
                else f" so far; stopped waiting after {bound:g} s (what is still queued is dropped, counted)",
            )
