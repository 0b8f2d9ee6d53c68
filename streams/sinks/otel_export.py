"""Exporter wrappers that count what the OpenTelemetry exporters deliver or drop, and on which threads.

A collector that is down or hangs must cost detection nothing and lose nothing silently: these
wrappers sit between the SDK's background processors and the OTLP exporters, count every batch
(exported or dropped, with its items), and once the sink gives up waiting (`abandoned`) drop what
is still handed to them at once, counted.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult, MetricsData
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

log = logging.getLogger(__name__)

# The OTLP clients log every failed attempt and batch (with a collector down: several lines a second,
# for hours). Every failed batch is counted below and said once a minute instead.
for _name in ("opentelemetry.exporter.otlp.common.http", "opentelemetry.exporter.otlp.proto.http"):
    logging.getLogger(_name).setLevel(logging.CRITICAL)
_WARN_EVERY_S = 60.0


class ExportStats:
    """What the exporters did, per signal: batches and items exported or dropped, and on which threads."""

    def __init__(self, endpoint: str = "", clock: Any = time.monotonic) -> None:
        self._lock = threading.Lock()
        self.counts: dict[str, int] = {}
        self.threads: set[int] = set()  # thread idents that ran an export (never the pipeline's)
        self.endpoint = endpoint
        self._clock = clock
        self._warned_at = float("-inf")
        self.warnings = 0

    def add(self, key: str, n: int = 1) -> None:
        with self._lock:
            self.counts[key] = self.counts.get(key, 0) + n
            warn = key.endswith("_batches_dropped") and self._clock() - self._warned_at >= _WARN_EVERY_S
            if warn:
                self._warned_at = self._clock()
                self.warnings += 1
                spans, metrics = self.counts.get("spans_dropped", 0), self.counts.get("metric_batches_dropped", 0)
        if warn:
            # A long-running worker may never reach close(): say it while it happens, at most once a minute.
            log.warning(
                "otel: export to %s failing; %d span(s) and %d metric batch(es) dropped so far",
                self.endpoint,
                spans,
                metrics,
            )

    def saw_thread(self) -> None:
        with self._lock:
            self.threads.add(threading.get_ident())

    def get(self, key: str) -> int:
        with self._lock:
            return self.counts.get(key, 0)


class CountedSpans(SpanExporter):
    """Counts what the wrapped exporter exported or failed; after close, drops (counted) at once."""

    def __init__(self, inner: SpanExporter, stats: ExportStats) -> None:
        self.inner = inner
        self.stats = stats
        self.abandoned = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.stats.saw_thread()
        if self.abandoned:
            result = SpanExportResult.FAILURE
        else:
            try:
                result = self.inner.export(spans)
            except Exception:
                log.exception("span export failed")
                result = SpanExportResult.FAILURE
        ok = result == SpanExportResult.SUCCESS
        self.stats.add("spans" if ok else "spans_dropped", len(spans))
        self.stats.add("span_batches" if ok else "span_batches_dropped")
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


class CountedMetrics(MetricExporter):
    def __init__(self, inner: MetricExporter, stats: ExportStats) -> None:
        super().__init__(
            preferred_temporality=inner._preferred_temporality,  # the inner exporter's choices, passed on
            preferred_aggregation=inner._preferred_aggregation,
        )
        self.inner = inner
        self.stats = stats
        self.abandoned = False

    def export(self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any) -> MetricExportResult:
        self.stats.saw_thread()
        if self.abandoned:
            result = MetricExportResult.FAILURE
        else:
            try:
                result = self.inner.export(metrics_data, timeout_millis=timeout_millis, **kwargs)
            except Exception:
                log.exception("metric export failed")
                result = MetricExportResult.FAILURE
        self.stats.add("metric_batches" if result == MetricExportResult.SUCCESS else "metric_batches_dropped")
        return result

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        self.inner.shutdown(timeout_millis=timeout_millis, **kwargs)

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return self.inner.force_flush(timeout_millis=timeout_millis)
