"""The one typed settings object: defaults < TOML file (CROSSTALK_CONFIG or --config) < env vars < code.

Env vars: CROSSTALK_<SECTION>__<FIELD>, e.g. CROSSTALK_KAFKA__BOOTSTRAP=127.0.0.1:19092,
CROSSTALK_DETECTION__FINGERPRINT_KEY=... . Defaults work on the embedded runner without a broker.
"""

from __future__ import annotations

import os
import tomllib
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from detectors.settings import DetectionSettings


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class IngestSettings(_Section):
    max_event_bytes: int = Field(default=4 * 1024 * 1024, ge=1024, description="larger events are rejected")
    reorder_lateness_s: float = Field(
        default=5.0, ge=0, description="replay: events up to this much out of order are re-sorted"
    )


class KafkaSettings(_Section):
    bootstrap: str = "127.0.0.1:19092"
    input_topic: str = "crosstalk.events"
    alerts_topic: str = "crosstalk.alerts"
    deadletter_topic: str = "crosstalk.deadletter"
    input_partitions: int = Field(default=4, ge=1)
    internal_partitions: int = Field(default=4, ge=1)
    app_id: str = "crosstalk"
    store: str = Field(default="auto", description="auto (rocksdb if rocksdict is installed), memory://, rocksdb://")
    web_port: int = Field(default=6066, ge=1, le=65535)
    web_bind: str = Field(
        default="127.0.0.1", description="address of the health/ready web server (0.0.0.0 in containers)"
    )
    data_dir: str = ".crosstalk-data"
    alerts_partitions: int = Field(default=4, ge=1)
    replication_factor: int = Field(default=1, ge=1, description="of every topic the workers create")
    standby_replicas: int = Field(default=0, ge=0, description="Faust standby copies of the state tables")
    max_message_bytes: int = Field(
        default=33_554_432, ge=1_048_576, description="topic max.message.bytes and producer limit (state snapshots)"
    )
    commit_interval_s: float = Field(default=2.0, gt=0, description="how often acked offsets are committed")
    batch_max: int = Field(
        default=1000, ge=1, description="input messages the ingest stage takes at once (one internal message each way)"
    )
    batch_wait_s: float = Field(
        default=0.01, gt=0, description="... or whatever arrived within this long: the batching's added latency"
    )
    snapshot_every: int = Field(
        default=2000, ge=1, description="checkpoint a partition's state after this many messages"
    )
    snapshot_interval_s: float = Field(default=2.0, gt=0, description="... or after this long (wall clock)")
    watermark_lateness_s: float = Field(
        default=1.0,
        ge=0,
        description="how far a join partition's watermark trails its newest event time: tolerance for producers "
        "writing slightly out of event-time order; every second here is a second of alert latency",
    )
    watermark_step_s: float = Field(
        default=1.0, gt=0, description="event time between watermark messages of the join stage"
    )
    watermark_idle_s: float = Field(
        default=30.0,
        gt=0,
        description="an input or join partition silent this long (wall clock) stops holding watermarks back",
    )
    heartbeat_interval_s: float = Field(
        default=5.0,
        gt=0,
        description="wall clock between event-time marks sent while input is quiet (releases the last alerts)",
    )


class WebhookReceiver(_Section):
    name: str
    url: str
    format: Literal["json", "alertmanager", "slack"] = "json"
    min_severity: Literal["info", "warning", "high", "critical"] = "high"
    kinds: list[str] = Field(default_factory=list, description="empty: all kinds")
    cache_domains: list[str] = Field(default_factory=list, description="empty: all domains")
    tenants: list[str] = Field(default_factory=list, description="non-empty: tenant-scoped receiver")
    headers: dict[str, str] = Field(default_factory=dict)
    secret: str | None = Field(default=None, description="HMAC secret; falls back to webhooks.secret")


class WebhookSettings(_Section):
    receivers: list[WebhookReceiver] = Field(default_factory=list)
    secret: str | None = None
    timeout_s: float = 5.0
    max_retries: int = Field(default=6, ge=0)
    backoff_initial_s: float = 0.5
    backoff_max_s: float = 30.0
    group_wait_s: float = Field(default=2.0, ge=0, description="Alertmanager group_wait")
    group_interval_s: float = Field(default=30.0, ge=0, description="Alertmanager group_interval")
    resolve_after_s: float = Field(
        default=600.0, gt=0, description="an incident with no new alert for this long (event time) is resolved"
    )
    resolve_on_close: bool = Field(
        default=True, description="embedded mode: resolve open incidents when the sink closes (end of a replay)"
    )
    close_timeout_s: float = Field(default=10.0, ge=0, description="close() drains at most this long")
    external_url: str = Field(default="http://127.0.0.1:6066", description="base of Alertmanager generatorURL")
    outbox_path: str = Field(default=".crosstalk-data/outbox", description="directory of the embedded-mode outbox")
    outbox_fsync: bool = Field(default=False, description="fsync every outbox write (survives power loss)")
    deadletter_path: str = ".crosstalk-data/webhook-deadletter.jsonl"
    deliver_group_id: str = Field(default="crosstalk-deliver", description="Kafka consumer group of `deliver`")
    deliver_max_poll_interval_s: float = Field(
        default=900.0, gt=0, description="deliveries with retries run inside the poll loop; keep above worst case"
    )


class OtelSettings(_Section):
    enabled: bool = False
    endpoint: str = Field(default="http://127.0.0.1:4318", description="OTLP/HTTP base; /v1/traces, /v1/metrics")
    console: bool = False
    service_name: str = "crosstalk"
    export_interval_s: float = 5.0
    headers: dict[str, str] = Field(default_factory=dict, description="extra OTLP request headers (auth)")
    timeout_s: float = 10.0
    span_hold_s: float = Field(
        default=1.0,
        ge=0,
        description="exchange spans stay open this long (event time) so later alerts naming them can add events",
    )
    max_open_spans: int = Field(default=10_000, ge=1)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CROSSTALK_", env_nested_delimiter="__", extra="forbid")

    detection: DetectionSettings = Field(default_factory=DetectionSettings)
    ingest: IngestSettings = Field(default_factory=IngestSettings)
    kafka: KafkaSettings = Field(default_factory=KafkaSettings)
    webhooks: WebhookSettings = Field(default_factory=WebhookSettings)
    otel: OtelSettings = Field(default_factory=OtelSettings)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Earlier wins: values given in code > environment > the TOML file > defaults.
        return (init_settings, env_settings, _TomlFile(settings_cls))


_CONFIG_PATH: ContextVar[str | None] = ContextVar("crosstalk_config_path", default=None)


class _TomlFile(PydanticBaseSettingsSource):
    """The TOML settings file named by load_settings(path) or $CROSSTALK_CONFIG."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # the whole file is returned by __call__

    def __call__(self) -> dict[str, Any]:
        path = _CONFIG_PATH.get() or os.environ.get("CROSSTALK_CONFIG")
        if not path:
            return {}
        return tomllib.loads(Path(path).read_text(encoding="utf-8"))


def load_settings(path: str | os.PathLike[str] | None = None, **overrides: Any) -> Settings:
    """Settings from defaults < TOML file (`path`, else $CROSSTALK_CONFIG) < env < `overrides` (dicts per section)."""
    token = _CONFIG_PATH.set(os.fspath(path) if path else None)
    try:
        return Settings(**overrides)
    finally:
        _CONFIG_PATH.reset(token)
