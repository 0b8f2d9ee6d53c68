"""Where alerts go: JSONL/Kafka, webhooks, OpenTelemetry. Sinks move data; they decide nothing."""

from __future__ import annotations

from streams.settings import Settings
from streams.sinks.base import Sink


def build_sinks(settings: Settings) -> list[Sink]:
    """The sinks the settings ask for, besides the alert output itself."""
    sinks: list[Sink] = []
    if settings.webhooks.receivers:
        from streams.sinks.webhook import WebhookSink

        sinks.append(WebhookSink.from_settings(settings))  # type: ignore[attr-defined]
    if settings.otel.enabled or settings.otel.console:
        from streams.sinks.otel import OtelSink

        sinks.append(OtelSink.from_settings(settings))  # type: ignore[attr-defined]
    return sinks
