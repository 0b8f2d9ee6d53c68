"""Thresholds of the detection core. Plain pydantic: the shell decides where values come from."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class DetectionSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # Fingerprinting (winnowing, Schleimer/Wilkerson/Aiken 2003). Guarantee: any shared passage of at
    # least t = k + w - 1 normalised words yields a shared fingerprint. k=5, w=12 -> t=16 words.
    fingerprint_key: str = Field(default="crosstalk-dev-key-change-me", description="secret for keyed hashing")
    k: int = Field(default=5, ge=2, le=32)
    w: int = Field(default=12, ge=1, le=128)

    # Join of request and response by request_id, in event time.
    request_wait_s: float = Field(default=900.0, gt=0, description="how long a request waits for its response")
    response_wait_s: float = Field(default=30.0, gt=0, description="how long a response waits for its request")
    max_pending_joins: int = Field(default=200_000, ge=1)
    dedup_window: int = Field(default=1_000_000, ge=1, description="event ids remembered for duplicate detection")
    dedup_window_s: float = Field(
        default=3600.0, gt=0, description="how long (event time) an event id is remembered for duplicate detection"
    )

    # Signals.
    overlong_min_status: int = 200
    overlong_max_status: int = 299
    accounting_min_ratio: float = Field(
        default=0.5, gt=0, lt=1, description="engine input_tokens below this share of the gateway's count is a mismatch"
    )
    accounting_min_gateway_tokens: int = Field(default=1024, ge=0, description="ignore small prompts (noise)")
    prefill_max_tokens_per_s: float = Field(
        default=400_000.0, gt=0, description="physical bound on prefill rate for one request"
    )
    prefill_min_tokens: int = Field(default=32_768, ge=0, description="only judge prefill speed of long prompts")
    pressure_high: float = Field(default=0.85, gt=0, le=1, description="used/capacity at which pressure is high")

    # Content overlap index.
    index_window_s: float = Field(default=900.0, gt=0, description="how long a text stays in a domain's index")
    index_max_docs: int = Field(default=20_000, ge=1, description="texts per domain index")
    index_max_fingerprints: int = Field(default=3_000_000, ge=1, description="fingerprints per domain index")
    common_min_tenants: int = Field(
        default=3, ge=2, description="a fingerprint in this many tenants' texts is boilerplate, not evidence"
    )
    overlap_min_matches: int = Field(
        default=1, ge=1, description="unexplained shared fingerprints that make overlap evidence at all"
    )
    overlap_alone_matches: int = Field(
        default=3,
        ge=1,
        description="run of consecutive matched fingerprints that, without any mechanism signal, is a warning",
    )
    overlap_warmup_docs: int = Field(
        default=1000, ge=0, description="texts a domain's index must have seen before overlap alone may alert"
    )
    overlap_strong_matches: int = Field(
        default=8, ge=1, description="run of consecutive matches that is critical on its own; score saturates here"
    )

    # Per-domain inputs are re-sorted by event time within this lateness, so that the order in which
    # partitions deliver them cannot change a verdict. It delays alerts by as much event time, so the
    # default is 0 (speak at once); raise it where partitions lag each other by seconds.
    domain_lateness_s: float = Field(default=0.0, ge=0)

    # Hostile input (README "Threat model").
    max_future_skew_s: float = Field(
        default=300.0,
        gt=0,
        description="events further ahead than this of the wall clock (and, in replay, of their stream) are "
        "rejected as future_ts and move no clock",
    )
    canary_tenants: list[str] = Field(
        default_factory=lambda: ["probe-*"],
        description="glob patterns of the probe tenants allowed to plant canaries (canary events, request canaries)",
    )
    canary_min_hex: int = Field(
        default=24, ge=16, description="a canary marker is PREFIX-<at least this many lowercase hex digits>"
    )
    max_canaries: int = Field(default=100_000, ge=1, description="canary markers remembered (oldest evicted)")
    domain_idle_s: float = Field(
        default=3600.0, gt=0, description="a cache domain with no input for this long (event time) is dropped"
    )
    max_domains: int = Field(
        default=10_000, ge=1, description="cache domains held at once; the least recently active is evicted"
    )

    # Incidents (Alertmanager-style grouping).
    incident_quiet_s: float = Field(default=600.0, gt=0, description="an incident resolves after this much quiet")
    max_request_ids_per_incident: int = Field(default=100_000, ge=1)
