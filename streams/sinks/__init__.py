"""Where alerts go: JSONL/Kafka, webhooks, OpenTelemetry. Sinks move data; they decide nothing."""

from __future__ import annotations

from streams.settings import Settings
from streams.sinks.base import Sink


def build_sinks(settings: Settings, *, webhooks: bool = True) -> list[Sink]:
    """The sinks the settings ask for, besides the alert output itself.

    The OpenTelemetry sink doubles as the webhook sink's metrics, so deliveries and failures are
    counted in the same meter as everything else.
    """
    sinks: list[Sink] = []
    otel = None
    if settings.otel.enabled or settings.otel.console:
        from streams.sinks.otel import OtelSink

        otel = OtelSink(settings.otel)
        sinks.append(otel)
    if webhooks and settings.webhooks.receivers:
        from streams.sinks.webhook import WebhookSink

        sinks.append(WebhookSink(settings.webhooks, metrics=otel))
    return sinks
