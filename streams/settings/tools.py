"""Settings of the tools around the pipeline: engine metrics scraping, the LiteLLM callback, the report, the
prober and the public corpus (sections of the one `Settings`, streams/settings/__init__.py)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr

from streams.redact import Url
from streams.settings.base import Section as _Section


class ScrapeTarget(_Section):
    url: Url = Field(description="engine base URL, e.g. http://10.0.0.5:30000")
    engine: Literal["sglang", "vllm"]
    cache_domain: str
    role: Literal["prefill", "decode", "unified"] | None = Field(
        default=None,
        description="the pool's place in a prefill/decode split; unset: derived from the engine's own metrics "
        "where they tell (SGLang's PD queues, docs/connect.md), else what they showed before, else decode beside a "
        "prefill server of the same cache domain, else unified",
    )
    name: str | None = None
    metrics_path: str = "/metrics"
    models_path: str = "/v1/models"
    model: str | None = Field(default=None, description="which /v1/models entry; default the first")


class ScrapeSettings(_Section):
    targets: list[ScrapeTarget] = Field(default_factory=list)
    interval_s: float = Field(default=15.0, gt=0)
    timeout_s: float = Field(default=5.0, gt=0, description="per connect and per read (httpx)")
    deadline_s: float = Field(
        default=10.0,
        gt=0,
        le=3600,
        description="per target and scrape, connect to last byte of /metrics and /v1/models",
    )
    max_body_bytes: int = Field(
        default=16 * 2**20, ge=1024, le=2**31, description="per /metrics body; past it the scrape is too_large"
    )
    models_refresh_s: float = Field(default=300.0, gt=0, description="how often /v1/models is re-read")
    limits_topic: str = Field(default="crosstalk.limits", description="compacted, key = cache_domain")
    limits_bind: str = "127.0.0.1"
    limits_port: int = Field(default=6067, ge=0, le=65535, description="GET /limits, /metrics, /health; 0: off")


class LiteLLMSettings(_Section):
    tenant_from: list[Literal["end_user", "metadata", "team", "key", "key_alias", "user", "org"]] = Field(
        default=["end_user", "metadata"],
        description="first present wins. end_user (the request's `user` field) and metadata (its metadata's "
        "tenant_metadata_field) work without LiteLLM's database; team, key, key_alias, user and org are virtual-key "
        "fields, which need it (DATABASE_URL): with the master key alone every call would be one tenant",
    )
    tenant_metadata_field: str = Field(
        default="tenant_id", description="tenant_from 'metadata': this entry of the request metadata"
    )
    send_text: bool = Field(default=False, description="False: fingerprint at the edge, no text leaves LiteLLM")
    output: Literal["kafka", "otlp", "jsonl"] = Field(
        default="kafka",
        description="where the callback's events go: the input topic (the workers detect); `crosstalk otlp`'s "
        "receiver at otlp_url, no broker (the text goes to it, which fingerprints it); or a JSONL file (events_path)",
    )
    otlp_url: Url = Field(default="http://127.0.0.1:14318/v1/traces", description="output otlp: the receiver")
    otlp_token: SecretStr | None = Field(default=None, description="output otlp: this sender's token (otlp.tokens)")
    events_path: str | None = Field(default=None, description="output jsonl: the events file, for crosstalk replay")
    cache_domains: dict[str, str] = Field(default_factory=dict, description="model -> cache domain")
    default_cache_domain: str | None = Field(default=None, description="else the model name")
    guard: bool = True
    unmapped_models: Literal["strictest", "fail_closed", "open"] = Field(
        default="strictest",
        description="a model in neither cache_domains nor default_cache_domain: checked against the smallest "
        "current limit of any domain (strictest), refused with 503 (fail_closed), or passed, counted (open)",
    )
    limits_url: Url | None = Field(default="http://127.0.0.1:6067/limits", description="GET; None: off")
    limits_from_kafka: bool = Field(default=False, description="also read the compacted limits topic")
    limits_refresh_s: float = Field(default=5.0, gt=0)
    limits_timeout_s: float = Field(
        default=2.0, gt=0, description="one GET /limits in total (a slow server delays the refresh, never requests)"
    )
    limits_first_wait_s: float = Field(
        default=1.0, ge=0, description="the first request waits this long at most for the first limits"
    )
    limits_max_age_s: float = Field(
        default=120.0, gt=0, description="older limits are not enforced (bounded staleness)"
    )
    limits_max_future_s: float = Field(
        default=60.0, ge=0, description="a limit record this far ahead of the clock is rejected (it would stick)"
    )
    fail_closed: bool = Field(default=False, description="reject when no fresh limit is known for the domain")
    headroom_tokens: int = Field(default=0, ge=0, description="reject above capacity - headroom")


class ReportSettings(_Section):
    disclose_counterparty: bool | Literal["pseudonym"] = Field(
        default="pseudonym",
        description="per-tenant notifications: name the other tenant (true), a keyed pseudonym, or nobody (false)",
    )
    pseudonym_key: SecretStr | None = Field(
        default=None,
        description="key of the pseudonyms; else derived from a configured detection.fingerprint_key, "
        "else random per run (pseudonyms then differ between runs)",
    )
    timeline_buckets: int = Field(default=600, ge=10, le=100_000, description="points per domain timeline at most")
    max_pending_requests: int = Field(
        default=200_000, ge=1, description="requests without cache_domain waiting for their response (timeline)"
    )
    kafka_timeout_s: float = Field(default=60.0, gt=0, description="--from-kafka: reading the topic to its end")


class ProbeSettings(_Section):
    """`crosstalk probe`: the active canary prober's identities, ladder, budget and judgement thresholds."""

    identities: list[str] = Field(
        default_factory=lambda: ["probe-a", "probe-b"],
        description="probe tenants, NAME or NAME=ENV_VAR holding its API key (default key: the name itself); "
        "names must match detection.canary_tenants",
    )
    marker_prefix: str = Field(default="CTK-CANARY", pattern=r"^[A-Za-z][A-Za-z0-9-]{0,31}$")
    marker_every: int = Field(default=64, ge=8, description="a canary marker every this many prompt words")
    ladder: list[float] = Field(
        default_factory=lambda: [0.0625, 0.25, 0.5, 0.65, 0.8, 0.98, 1.05],
        description="prompt sizes as fractions of the advertised window (used when the pool size is unknown)",
    )
    max_requests: int = Field(default=50, ge=1, description="budget: requests per run (cycle)")
    max_tokens: int = Field(default=10_000_000, ge=1, description="budget: prompt + max output tokens per run")
    rate_per_s: float = Field(default=4.0, gt=0, description="budget: request starts per second, all identities")
    max_output_tokens: int = Field(default=96, ge=8, le=4096)
    accounting_tolerance: float = Field(
        default=2.0, gt=1, description="usage.prompt_tokens off by more than this factor from what was sent is flagged"
    )
    accounting_min_tokens: int = Field(default=256, ge=1, description="smaller prompts are not judged on accounting")
    max_prefill_tokens_per_s: float = Field(default=400_000.0, gt=0, description="faster implied prefill is flagged")
    ttft_min_tokens: int = Field(default=32_768, ge=1, description="only prompts this long are judged on TTFT")
    timeout_s: float = Field(
        default=300.0,
        gt=0,
        description="per request: connect to the last byte of the answer (a deadline, not per read)",
    )
    deadline_s: float = Field(default=1800.0, gt=0, description="per cycle: discovery, ladder and confirmation")
    max_response_bytes: int = Field(
        default=4 * 2**20, ge=4096, le=2**31, description="per answer read (an SSE stream, /models, an error body)"
    )
    cache_domain: str | None = Field(default=None, description="cache_domain of the probe's events; else host:port")


class CorpusSettings(_Section):
    path: str | None = Field(
        default=None,
        description="public-text corpus file (`crosstalk corpus add`): its fingerprints are common, never evidence",
    )
    licences: bool = Field(
        default=True,
        description="count the texts of common open-source licences and their notices (streams/inputs/licences/) as "
        "public too, with or without a corpus file",
    )
    max_file_bytes: int = Field(
        default=64 << 20,
        ge=1,
        description="`crosstalk corpus add`: a larger file (or one that inflates past it with --gunzip) is refused; "
        "memory while adding is about 16 bytes per word of the largest file",
    )
