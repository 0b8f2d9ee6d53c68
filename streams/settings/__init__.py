"""The one typed settings object: defaults < TOML file (CROSSTALK_CONFIG or --config) < env vars < code.

Env vars: CROSSTALK_<SECTION>__<FIELD>, e.g. CROSSTALK_KAFKA__BOOTSTRAP=127.0.0.1:19092,
CROSSTALK_DETECTION__FINGERPRINT_KEY=... . Defaults work on the embedded runner without a broker.
"""

from __future__ import annotations

import os
import sys
import tomllib
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, Field, SecretStr, field_validator, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from detectors.settings import DetectionSettings
from streams.redact import Url, check_webhook_url
from streams.settings.base import Section as _Section
from streams.settings.tools import (
    CorpusSettings,
    LiteLLMSettings,
    ProbeSettings,
    ReportSettings,
    ScrapeSettings,
)
from streams.settings.tools import (
    ScrapeTarget as ScrapeTarget,
)


class IngestSettings(_Section):
    max_event_bytes: int = Field(default=4 * 1024 * 1024, ge=1024, description="larger events are rejected")
    reorder_lateness_s: float = Field(
        default=5.0, ge=0, description="replay: events up to this much out of order are re-sorted"
    )
    replay_wall_clock: bool = Field(
        default=True,
        description="replay: events more than detection.max_future_skew_s past the wall clock are rejected (future_ts)",
    )


class KafkaSettings(_Section):
    bootstrap: str = "127.0.0.1:19092"
    input_topic: str = "crosstalk.events"
    alerts_topic: str = "crosstalk.alerts"
    deadletter_topic: str = "crosstalk.deadletter"
    topology: Literal["staged", "direct"] = Field(
        default="direct",
        description="direct (default): one stage, a Monitor per input partition, for input keyed by cache domain, as "
        "every producer crosstalk ships keys it (produce, GatewayProducer, the LiteLLM callback, the OTLP bridge, "
        "the probe); input keyed otherwise is sent on to its domain's partition or dead-lettered `misrouted`, "
        "never judged on the wrong one. staged: ingest -> join -> domain stages over internal topics, for foreign "
        "producers that key events any way (docs/operations.md, ADR 0003)",
    )
    input_partitions: int = Field(default=4, ge=1)
    internal_partitions: int = Field(default=4, ge=1)
    app_id: str = "crosstalk"
    store: str = Field(default="auto", description="auto (rocksdb if rocksdict is installed), memory://, rocksdb://")
    # RocksDB's own memory, per table partition (one database each): Faust's defaults are 3 write buffers of 64 MB and
    # a 2 GB block cache per database, which a worker's snapshot writes filled for the first half hour of a soak.
    store_write_buffer_mb: int = Field(
        default=8, ge=1, le=1024, description="RocksDB write buffer (memtable) per table partition, MB (at most 2)"
    )
    store_block_cache_mb: int = Field(
        default=16,
        ge=1,
        le=65536,
        description="RocksDB block cache per table partition, MB (snapshots are read only at a restore)",
    )
    web_port: int = Field(default=6066, ge=1, le=65535)
    web_bind: str = Field(
        default="127.0.0.1", description="address of the health/ready web server (0.0.0.0 in containers)"
    )
    data_dir: str = ".crosstalk-data"
    heap_trim_s: float = Field(
        default=60.0,
        ge=0,
        description="wall clock between giving the C heap's free pages back to the system (glibc: fixed malloc "
        "thresholds at start, malloc_trim on this timer; streams/heap.py). 0: off. It took 29 % off a soak's "
        "memory; what kept growing was RocksDB's buffers (store_write_buffer_mb, docs/operations.md)",
    )
    alerts_partitions: int = Field(default=4, ge=1)
    replication_factor: int = Field(default=1, ge=1, description="of every topic the workers create")
    standby_replicas: int = Field(default=0, ge=0, description="Faust standby copies of the state tables")
    max_message_bytes: int = Field(
        default=33_554_432, ge=1_048_576, description="topic max.message.bytes and producer limit (state snapshots)"
    )
    commit_interval_s: float = Field(default=2.0, gt=0, description="how often acked offsets are committed")
    batch_max: int = Field(
        default=1000,
        ge=1,
        description="input messages an input stage takes at once (staged: one internal message each way; "
        "direct: what the consumer fetched, up to this many)",
    )
    batch_wait_s: float = Field(
        default=0.05,
        gt=0,
        description="staged ingest: ... or whatever arrived within this long: the batching's added latency (50 ms: "
        "one event per message ran at ~2x the rate of 10 ms, every small batch costing messages at every stage; "
        "without a window, at 3,000 events/s p50 rose from ~0.17 to ~1.3 s)",
    )
    fetch_max_wait_ms: int = Field(
        default=100,
        ge=1,
        le=30_000,
        description="how long the worker's consumer lets the broker hold a fetch that found nothing new (Faust's "
        "1.5 s delayed records of busy partitions behind a fetch waiting on quiet ones: text-rich p99 ~1.7 s); "
        "every fetch round costs a request per broker, ~10/s when idle at 100 ms",
    )
    snapshot_every: int = Field(
        default=2000, ge=1, description="checkpoint a partition's state after this many messages"
    )
    snapshot_interval_s: float = Field(
        default=5.0,
        gt=0,
        description="... or after this long (wall clock); every snapshot flushes the producer first: at 2 s a live "
        "worker at half its rate fell seconds behind (issue 16), at 5 s it kept up; longer = more replay after a crash",
    )
    snapshot_max_share: float = Field(
        default=0.2,
        gt=0,
        le=1,
        description="at most this share of a stage's time goes to snapshots: one that took d s defers the next "
        "by d/share (large partitions snapshot less often and replay more after a crash, instead of stalling)",
    )
    watermark_lateness_s: float = Field(
        default=0.05,
        ge=0,
        description="how far a join partition's watermark trails its newest event time: tolerance for producers "
        "writing out of event-time order across ingest batches (disorder within one batch costs nothing); every "
        "second here is a second of alert latency; a later item is still evaluated, out of order (domain.late_items)",
    )
    watermark_step_s: float = Field(
        default=0.05,
        gt=0,
        description="event time between watermark-only messages (to partitions that got no items; a message with "
        "items always carries the current watermark): up to this much alert latency, for at most 1/step messages "
        "per second per partition pair (0.1 -> 0.05: staged p99 at half rate ~305 -> 200-260 ms)",
    )
    watermark_idle_s: float = Field(
        default=30.0,
        gt=0,
        description="an input partition its reader saw no message on this long is reported idle and stops holding "
        "watermarks back; a partition never heard of stops holding them back this long after it could have been",
    )
    watermark_stalled_s: float = Field(
        default=300.0,
        gt=0,
        description="a partition heard of before whose reader or join went silent this long (wall clock) stops "
        "holding watermarks back: its owner is hung, not caught up (a caught-up input partition is reported idle). "
        "Shorter than a rebalance or a slow worker's pause lets its items through late (domain.late_items)",
    )
    fleet_replay_s: float = Field(600.0, ge=0, description="a starting worker reads the fleet topic from this long ago")
    heartbeat_interval_s: float = Field(
        default=5.0,
        gt=0,
        description="wall clock between event-time marks sent while input is quiet (releases the last alerts)",
    )
    # 15 s and 20 s, not Faust's 60 s: recovery within a minute of a fault (issue 42). With 60 s a killed worker's
    # partitions stayed unread for a minute, and a whole-cluster restart waited up to 158 s (docs/operations.md).
    session_timeout_s: float = Field(
        default=15.0,
        ge=6,
        le=1800,
        description="the consumer group's session timeout: a worker killed without leaving keeps its partitions, "
        "unread, this long before the group hands them to the others (at 15 s a killed worker's partitions "
        "raised alerts again within 22 s on a 3-node cluster, bench/bench_cluster.py); too short, and a worker "
        "whose heartbeats stall (a loaded machine) is taken for dead and rebalanced",
    )
    rebalance_timeout_s: float = Field(
        default=20.0,
        ge=6,
        le=1800,
        description="how long a rebalance waits for every member to rejoin (a member that went away without leaving "
        "holds the group this long, e.g. after a whole-cluster restart)",
    )
    stall_s: float = Field(
        default=15.0,
        gt=0,
        description="a partition the consumer delivered nothing of this long (and over 3 fetch rounds) while the "
        "broker holds messages past its next offset is read again from its committed offset, once until it moves "
        "past that offset (streams/kafka/stall.py); it is not reported idle meanwhile",
    )
    stall_check_s: float = Field(
        default=5.0,
        gt=0,
        description="wall clock between the worker's checks for such partitions (one end-offset request each)",
    )


class WebhookReceiver(_Section):
    name: str
    url: Url = Field(description="http:// or https:// only; shown redacted (userinfo, query values, path tokens)")
    format: Literal["json", "alertmanager", "slack"] = "json"
    min_severity: Literal["info", "warning", "high", "critical"] = "high"
    kinds: list[str] = Field(default_factory=list, description="empty: all kinds")
    cache_domains: list[str] = Field(default_factory=list, description="empty: all domains")
    tenants: list[str] = Field(default_factory=list, description="non-empty: tenant-scoped receiver")
    headers: dict[str, SecretStr] = Field(default_factory=dict, description="extra request headers (auth): secret")
    secret: SecretStr | None = Field(default=None, description="HMAC secret; falls back to webhooks.secret")
    allow_metadata_address: bool = Field(
        default=False,
        description="allow a link-local or cloud-metadata host (169.254.0.0/16, fe80::/10, fd00:ec2::254, "
        "metadata.google.internal): refused by default; a receiver there posts alerts to the host's credentials "
        "service",
    )

    @model_validator(mode="after")
    def _check_url(self) -> WebhookReceiver:
        # A receiver URL is where alerts go: file://, gopher:// or a bare host would make the webhook
        # client read local files or speak other protocols on an operator's typo (or an attacker's config).
        check_webhook_url(self.url, self.allow_metadata_address)
        return self


class WebhookSettings(_Section):
    receivers: list[WebhookReceiver] = Field(default_factory=list)
    secret: SecretStr | None = Field(
        default=None, description="HMAC-SHA256 signing key; without it deliveries go out unsigned (warned at start)"
    )
    timeout_s: float = 5.0
    max_retries: int = Field(default=6, ge=0)
    backoff_initial_s: float = 0.5
    backoff_max_s: float = 30.0
    group_wait_s: float = Field(default=2.0, ge=0, description="Alertmanager group_wait")
    group_interval_s: float = Field(default=30.0, ge=0, description="Alertmanager group_interval")
    resend_interval_s: float = Field(
        default=60.0,
        gt=0,
        description="alertmanager receivers: active alerts are re-sent this often (wall clock), as Prometheus does, "
        "so Alertmanager does not resolve them on its own while the incident is open",
    )
    ends_at_intervals: float = Field(
        default=4.0, ge=1, description="a re-sent alert's endsAt lies this many resend intervals in the future"
    )
    resend_for_s: float = Field(
        default=86_400.0,
        gt=0,
        description="safety net: an incident with no new alert for this long (wall clock) is no longer re-sent "
        "(a lost resolution must not keep it firing for ever); Alertmanager then lets it lapse at its endsAt",
    )
    close_timeout_s: float = Field(default=10.0, ge=0, description="close() drains at most this long")
    external_url: Url = Field(default="http://127.0.0.1:6066", description="base of Alertmanager generatorURL")
    outbox_path: str = Field(default=".crosstalk-data/outbox", description="directory of the embedded-mode outbox")
    outbox_fsync: bool = Field(default=False, description="fsync every outbox write (survives power loss)")
    deadletter_path: str = ".crosstalk-data/webhook-deadletter.jsonl"
    deliver_group_id: str = Field(default="crosstalk-deliver", description="Kafka consumer group of `deliver`")
    deliver_max_poll_interval_s: float = Field(
        default=900.0, gt=0, description="deliveries with retries run inside the poll loop; keep above worst case"
    )


class OtelSettings(_Section):
    enabled: bool = False
    endpoint: Url = Field(default="http://127.0.0.1:4318", description="OTLP/HTTP base; /v1/traces, /v1/metrics")
    console: bool = False
    service_name: str = "crosstalk"
    export_interval_s: float = 5.0
    traces: bool = Field(default=True, description="export spans (off e.g. for a metrics-only backend)")
    metrics: bool = Field(default=True, description="export metrics (off e.g. for Jaeger, which takes no metrics)")
    headers: dict[str, SecretStr] = Field(default_factory=dict, description="extra OTLP request headers (auth)")
    timeout_s: float = Field(
        default=2.0, gt=0, description="one export (with its retries) gives up after this long, off the pipeline thread"
    )
    shutdown_timeout_s: float = Field(
        default=2.0, ge=0, description="close() waits at most this long for the last exports; the rest is counted lost"
    )
    max_queue_spans: int = Field(default=32_768, ge=512, description="spans queued for export; overflow is dropped")
    span_hold_s: float = Field(
        default=1.0,
        ge=0,
        description="exchange spans stay open this long (event time) so later alerts naming them can add events",
    )
    max_open_spans: int = Field(default=10_000, ge=1)


class OtlpToken(_Section):
    """One sender of the OTLP receiver: its bearer token, and the tenants its spans may assert."""

    # A validation error must not quote the token (pydantic puts the input in its message otherwise).
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    sender: str = Field(
        pattern=r"^[A-Za-z0-9._-]{1,64}$",
        description="its name; scopes its request ids (<sender>/<id>) and names it in rejects and counters",
    )
    token: SecretStr = Field(min_length=16, description="the bearer token (Authorization: Bearer ...); a secret")
    tenants: list[str] = Field(
        default_factory=list, description="glob patterns of the tenant ids its spans may assert (e.g. 'team-*')"
    )
    probe: bool = Field(
        default=False,
        description="may assert probe tenants (detection.canary_tenants) and register canaries; nobody else may",
    )


class OtlpSettings(_Section):
    """`crosstalk otlp`: OTLP GenAI spans in. Attribute lists are tried in order, span then resource attributes."""

    bind: str = Field(default="127.0.0.1", description="address of the OTLP/HTTP receiver (loopback by default)")
    port: int = Field(default=14318, ge=1, le=65535, description="OTLP/HTTP receiver port (POST /v1/traces)")
    max_body_bytes: int = Field(
        default=16 * 1024 * 1024, ge=1024, description="a larger body, on the wire or inflated, is refused (413)"
    )
    tokens: list[OtlpToken] = Field(
        default_factory=list,
        description="senders and their bearer tokens; with any set, every request must present one (else 401)",
    )
    allow_unauthenticated: bool = Field(
        default=False,
        description="serve a non-loopback bind without tokens (anyone who reaches it may assert any tenant)",
    )
    header_timeout_s: float = Field(
        default=10.0, gt=0, description="a connection that has not sent a whole request head by then is closed"
    )
    body_timeout_s: float = Field(default=30.0, gt=0, description="a request body not read whole by then: 408")
    max_inflight_bytes: int = Field(
        default=64 * 1024 * 1024,
        ge=1024,
        description="request bytes held (read or being mapped) by all requests together; beyond it 503, which "
        "exporters retry (at least max_body_bytes is always allowed)",
    )
    max_spans_per_request: int = Field(
        default=32_768,
        ge=1,
        description="a payload with more spans is refused whole (413 too_many_spans) before any span is built",
    )
    max_decoded_objects: int = Field(
        default=1_048_576,
        ge=1024,
        description="a payload that would decode to more protobuf messages or JSON values is refused whole "
        "(413 too_many_objects) before it is parsed: the body limit bounds bytes, this what they decode to",
    )

    @field_validator("tokens")
    @classmethod
    def _distinct_senders(cls, tokens: list[OtlpToken]) -> list[OtlpToken]:
        # A token shared by two senders would make the sender (and so the request-id scope) ambiguous.
        for what, values in (
            ("sender", [t.sender for t in tokens]),
            ("token", [t.token.get_secret_value() for t in tokens]),
        ):
            if len(set(values)) != len(values):
                raise ValueError(f"otlp.tokens: each {what} must be distinct")
        return tokens

    operations: list[str] = Field(
        default_factory=lambda: ["chat", "text_completion", "generate_content"],
        description="gen_ai.operation.name values mapped; other spans are skipped (counted, not dead-lettered)",
    )
    openinference: bool = Field(
        default=True, description="also map OpenInference LLM spans (openinference.span.kind=LLM; Envoy AI Gateway)"
    )
    logs_wait_s: float = Field(
        default=10.0,
        gt=0,
        le=600,
        description="/v1/logs: how long a span and its gen_ai.client.inference.operation.details record wait for "
        "each other before each is mapped alone (the SDK's span batches leave every 5 s)",
    )
    logs_join_max: int = Field(default=10_000, ge=1, description="/v1/logs: halves waiting on each side, at most")
    logs_expected: bool = Field(
        default=False,
        description="/v1/logs: a span without content waits for its record from the start, not only once a record "
        "came (through a Collector, its logs pipeline may deliver a call's record after its span)",
    )
    logs_max_records: int = Field(
        default=32_768, ge=1, description="/v1/logs: a request with more log records is refused whole (413)"
    )
    tenant_attributes: list[str] = Field(default_factory=lambda: ["crosstalk.tenant_id", "user.id", "enduser.id"])
    cache_domain_attributes: list[str] = Field(default_factory=lambda: ["crosstalk.cache_domain"])
    cache_domain_from_server_address: bool = Field(
        default=True, description="else use server.address[:server.port] (the engine endpoint) as the domain"
    )
    default_cache_domain: str | None = None
    cache_domain_from_provider: bool = Field(
        default=True,
        description="last of all, gen_ai.provider.name (gen_ai.system; OpenInference llm.provider) as the domain",
    )
    prompt_tokens_attributes: list[str] = Field(
        default_factory=lambda: ["crosstalk.prompt_tokens"], description="the gateway's own prompt-token count"
    )
    prompt_tokens_from_usage: bool = Field(
        default=True, description="without it, use gen_ai.usage.input_tokens (accounting mismatch then undetectable)"
    )
    request_id_attributes: list[str] = Field(
        default_factory=lambda: ["crosstalk.request_id"], description="else <trace_id>-<span_id>"
    )
    session_attributes: list[str] = Field(default_factory=lambda: ["gen_ai.conversation.id", "session.id"])
    ttft_s_attributes: list[str] = Field(
        default_factory=lambda: ["gen_ai.response.time_to_first_chunk", "gen_ai.latency.time_to_first_token"]
    )
    ttft_ms_attributes: list[str] = Field(default_factory=lambda: ["crosstalk.ttft_ms"])
    context_window_attributes: list[str] = Field(default_factory=lambda: ["crosstalk.context_window"])
    canary_attributes: list[str] = Field(
        default_factory=lambda: ["crosstalk.canaries"], description="a prober's canary markers (string array)"
    )
    status_code_attributes: list[str] = Field(default_factory=lambda: ["http.response.status_code"])
    error_status_code: int = Field(default=500, ge=100, le=599, description="status of an ERROR span without one")
    kafka_topic: str = Field(default="otlp_spans", description="the Collector Kafka exporter's default traces topic")
    kafka_encoding: Literal["otlp_proto", "otlp_json", "auto"] = "otlp_proto"
    kafka_group_id: str = "crosstalk-otlp"
    kafka_partitions: int = Field(
        default=4, ge=1, description="partitions of kafka_topic when the bridge creates it (an existing topic is kept)"
    )


class Settings(BaseSettings):
    # hide_input_in_errors: settings hold secrets (the fingerprint key, webhook secrets, OTLP tokens), and
    # pydantic quotes the input of a failing field in its message unless the outermost model says not to.
    model_config = SettingsConfigDict(
        env_prefix="CROSSTALK_", env_nested_delimiter="__", extra="forbid", hide_input_in_errors=True
    )

    detection: DetectionSettings = Field(default_factory=DetectionSettings)
    ingest: IngestSettings = Field(default_factory=IngestSettings)
    kafka: KafkaSettings = Field(default_factory=KafkaSettings)
    webhooks: WebhookSettings = Field(default_factory=WebhookSettings)
    otel: OtelSettings = Field(default_factory=OtelSettings)
    otlp: OtlpSettings = Field(default_factory=OtlpSettings)
    scrape: ScrapeSettings = Field(default_factory=ScrapeSettings)
    litellm: LiteLLMSettings = Field(default_factory=LiteLLMSettings)
    report: ReportSettings = Field(default_factory=ReportSettings)
    probe: ProbeSettings = Field(default_factory=ProbeSettings)
    corpus: CorpusSettings = Field(default_factory=CorpusSettings)

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


class MissingFingerprintKey(SystemExit):
    """A long-running worker without a configured fingerprint key: refuse (exit code 2) rather than hash
    with a key that every other deployment shares."""


def require_fingerprint_key(settings: Settings, command: str) -> Settings:
    """Workers: a fingerprint key must be configured (file or CROSSTALK_DETECTION__FINGERPRINT_KEY)."""
    if not settings.detection.fingerprint_key.configured:
        print(
            f"crosstalk {command}: no fingerprint key configured; set detection.fingerprint_key "
            "or CROSSTALK_DETECTION__FINGERPRINT_KEY (a long random secret shared by gateways and workers)",
            file=sys.stderr,
        )
        raise MissingFingerprintKey(2)
    return settings


def with_run_key(settings: Settings, command: str) -> Settings:
    """Replay and demo: without a configured key, a random one for this run, said on stderr (never printed).

    Fingerprints then match only within this run, which is all a replay needs; edge fingerprints made
    with another key are rejected as fingerprint_params, as they would be with any other key.
    """
    if settings.detection.fingerprint_key.configured:
        return settings
    # The unconfigured default is already this process's own random key (detectors.settings.process_key).
    print(
        f"crosstalk {command}: no fingerprint key configured; using a random key for this run only",
        file=sys.stderr,
    )
    return settings
