"""Thresholds of the detection core. Plain pydantic: the shell decides where values come from."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

# Re-exported: checkpoints pickled before the key moved name detectors.settings.FingerprintKey.
from detectors.secret_key import FingerprintKey as FingerprintKey
from detectors.secret_key import Key, process_key


class DetectionSettings(BaseModel):
    # Fingerprinting (winnowing, Schleimer/Wilkerson/Aiken 2003). Guarantee: any shared passage of at
    # least t = k + w - 1 normalised words yields a shared fingerprint. k=5, w=12 -> t=16 words.
    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    fingerprint_key: Key = Field(
        default_factory=process_key,
        description="secret of the keyed hash; workers refuse to start without one, replay/demo use a random one",
    )
    k: int = Field(default=5, ge=2, le=32)
    w: int = Field(default=4, ge=1, le=128)

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
        default=0.5,
        gt=0,
        lt=1,
        description="engine input_tokens below this share of what the normal engine/gateway ratio (learned per "
        "model and tenant in the domain) makes of the gateway's count is a mismatch",
    )
    accounting_floor_ratio: float = Field(
        default=0.0625,
        gt=0,
        lt=1,
        description="engine input_tokens below this share of the gateway's count is a mismatch from the first "
        "exchange, learned or not, and never learned as normal: the placeholder (1 token for 800k). Tokenizers "
        "differ by up to ~4x, not 16x",
    )
    accounting_min_gateway_tokens: int = Field(
        default=1024, ge=0, description="prompts the placeholder check judges (smaller ones: noise)"
    )
    accounting_max_ratio: float = Field(
        default=2.0,
        gt=1,
        description="engine input_tokens at least this multiple (or below accounting_min_ratio) of what the key's "
        "neighbours in size make of the gateway's count: the usage counted another prompt (a response delivered "
        "to the wrong request carries its usage)",
    )
    accounting_max_spread: float = Field(
        default=0.25,
        ge=0,
        description="neighbours in size agree (and judge) when their upper and lower quartile ratios are within "
        "this many octaves",
    )
    accounting_min_gap_tokens: int = Field(
        default=128,
        ge=0,
        description="the other-prompt check needs the engine's count this many tokens from the expected one (with "
        "neighbours within 1.5x in size, a fixed overhead under twice this gap never reaches it)",
    )
    accounting_learn_min: int = Field(
        default=8,
        ge=1,
        description="exchanges of a (model, tenant) before its learned ratio is used (until then: only the floor)",
    )
    accounting_window: int = Field(
        default=32,
        ge=1,
        le=4096,
        description="last ratios kept per (model, tenant), their median the norm; and last counts of every size",
    )
    accounting_max_keys: int = Field(
        default=4096, ge=1, description="(model, tenant) ratios learned per domain at most (least recent evicted)"
    )
    cache_read_min_tokens: int = Field(
        default=256,
        ge=1,
        description="a response's cached input tokens below this are no foreign_cache_read "
        "evidence (a chat template or a short shared instruction is reused everywhere)",
    )
    cache_read_window_s: float = Field(
        default=3600.0,
        gt=0,
        description="a tenant's own prompts count for foreign_cache_read this long (event "
        "time; at most twice as long): a prefix its tenant sent within it is no foreign KV",
    )
    cache_read_max_tenants: int = Field(
        default=4096,
        ge=1,
        description="tenants whose longest prompt a domain keeps for foreign_cache_read "
        "(least recently seen evicted: counted as having sent nothing)",
    )
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
    shared_min_tenants: int = Field(
        default=2,
        ge=2,
        description="a fingerprint this many tenants have had is shared (a template, a public text): no evidence "
        "for a content-only alert, though it still names the source next to a mechanism (docs/adr/0008)",
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
    # Evidence from the shape of a match (docs/adr/0003): each unexplained fingerprint of a source counts 1 when
    # no other tenant has had it over the long horizon (rare), 1/2 when one other has, 0 when more have.
    overlap_high_run: int = Field(
        default=3, ge=1, description="consecutive matched fingerprints (one passage) that may make a high alert"
    )
    overlap_max_scatter: float = Field(
        default=2.0, ge=0, description="short scattered passages per long one beyond which a match is vocabulary"
    )
    overlap_high_evidence: float = Field(
        default=2.0, gt=0, description="rarity-weighted matched fingerprints of one source that make a high alert"
    )
    overlap_critical_evidence: float = Field(
        default=6.0, gt=0, description="rarity-weighted matched fingerprints of one source that make it critical"
    )
    overlap_usage_tokens: bool = Field(
        default=True,
        description="weigh a source's matched units by its text's unit class (characters ~1 token, words ~1.3), told "
        "by the engine's usage tokens per unit, when naming the dominant source of a mixed output; off: every unit "
        "weighs 1 (docs/adr/0004)",
    )
    overlap_attach: int = Field(
        default=2,
        ge=0,
        description="fingerprints next to a run, the receiver's own and the source's, that make it one text with "
        "the receiver's (no high alone); 0 = off (docs/adr/0004)",
    )
    overlap_junction: bool = Field(
        default=True,
        description="a short run whose neighbouring fingerprints are innocent text (own, public, common) the source "
        "holds too is where two innocent texts meet, not a page: no high alone (docs/adr/0004); off when k - 1 < w",
    )
    overlap_in_order: bool = Field(
        default=True,
        description="a run shorter than overlap_strong_matches counts as a page only if its fingerprints follow each "
        "other in one text of the source as in the output (a stale page is one contiguous piece; docs/adr/0004)",
    )
    overlap_chance_max_run: int = Field(
        default=16,
        ge=1,
        description="the longest run an output's chance background can require of a source (`required_run`): where a "
        "source's text holds much of the output anyway (two tenants writing one kana-rich language), a run that chance "
        "explains is no page, however long; at most this, so a long page is never out of reach",
    )
    overlap_chance_alpha: float = Field(
        default=0.05,
        ge=0,
        description="a free run is a page only if fewer than this many runs as long are expected by chance, at the "
        "rate the source's text meets the rest of the output; kana-heavy text needs a longer run; 0 = off "
        "(docs/adr/0004, information)",
    )
    overlap_coverage: bool = Field(
        default=True,
        description="a free run below overlap_strong_matches is a page only if it covers the units every page of that "
        "many matches covers (need * w + k - 1 - 2 (w - 1)); known where the monitor fingerprints the text itself "
        "(docs/adr/0004, coverage)",
    )
    overlap_warmup_s: float = Field(
        default=120.0,
        ge=0,
        description="event time a domain's index must have been learning before overlap alone may alert",
    )
    overlap_warmup_slow_docs: int = Field(
        default=200, ge=0, description="a slow domain is warm with this many texts after overlap_warmup_slow_s"
    )
    overlap_warmup_slow_s: float = Field(
        default=600.0, ge=0, description="event time after which overlap_warmup_slow_docs texts make a domain warm"
    )
    overlap_hold_cold: bool = Field(
        default=True,
        description="a cold domain holds the responses a warm one would flag on content alone and judges them again "
        "after overlap_hold_s, when idle or at the end of input (detectors/held.py); off: they stay info",
    )
    overlap_held_max: int = Field(
        default=1000, ge=1, description="responses a cold domain holds; past it the oldest is judged at once"
    )
    overlap_hold_s: float = Field(
        default=600.0,
        gt=0,
        description="event time a held response waits before it is judged (sooner only at the end of input, when the "
        "domain goes idle or the held list is full): public text has shown up in other tenants' texts by then, and "
        "the window (index_window_s) still holds the cold period",
    )
    overlap_pool_turnovers: float = Field(
        default=2.0,
        ge=0,
        description="a content match whose newest source text is older than this many turnovers of the domain's "
        "largest KV pool (tokens allocated since, over capacity; detectors/pool.py) cannot be a stale page or a "
        "prefix-cache hit: at most a warning. 0 = off; no effect without cache_stats and token counts",
    )
    tool_calls: bool = Field(
        default=True,
        description="a 2xx response that calls a function whose name (snake_case, kebab-case or camelCase) its own "
        "prompt text never writes is the answer to another request: a high mechanism finding "
        "(undeclared_tool_call; detectors/toolcalls.py, ADR 0019). Needs both texts at ingest",
    )
    tool_calls_min_declared: int = Field(
        default=3,
        ge=1,
        description="a tenant's tool calls are judged once at least this many first calls of a function in one of "
        "its sessions were declared by their prompts in the domain (and at most a quarter as many were not): "
        "producers that log messages without `tools` are never judged, even where prompts re-send their history",
    )
    tool_calls_max_tenants: int = Field(
        default=10_000, ge=1, description="tenants whose tool-call counts a domain keeps"
    )
    overlap_whole_sentences: bool = Field(
        default=True,
        description="a content-only finding whose every page run touches only output sentences that are whole "
        "sentences of the source's text, and whose source's runs span less than overlap_beyond_pool_share of the "
        "output's units (more is a whole response handed over), is a warning, not high: a model writing a text it "
        "knows writes whole sentences, an engine's page is cut at a token count (detectors/sentences.py; ADR 0008 "
        "decision 8). A mechanism still makes it critical",
    )
    overlap_beyond_pool_share: float = Field(
        default=0.6,
        ge=0,
        le=1,
        description="past overlap_pool_turnovers only a delivery mix-up (a gateway's response cache, a session routed "
        "to another tenant) can carry another tenant's text, and it delivers a whole response: a finding whose source "
        "explains less than this share of the output's fingerprints is then info, not a warning (0 = off; ADR 0008)",
    )
    # Delivery mix-ups (detectors/mixup.py; ADR 0008 decision 9): a whole response told by the pair of exchanges.
    mixup: bool = Field(
        default=True,
        description="tell a whole response delivered to another tenant by its second witness: the owner got the same "
        "answer (copy, also from a cache: mixup_copy_before_s), the two answers crossed (swap), or the owner got "
        "next to nothing (misroute), while the owner's request was in flight",
    )
    mixup_window_s: float = Field(
        default=600.0, gt=0, le=86_400, description="event time a delivery stays a witness (the longest request)"
    )
    mixup_copy_before_s: float = Field(
        default=600.0,
        ge=0,
        le=86_400,
        description="how long before a request was sent an answer delivered to another tenant can be handed to it "
        "again as a copy (a response cache keyed wrongly; mixup_window_s at most; 0 = only in flight; ADR 0034)",
    )
    mixup_response_ids: bool = Field(
        default=True,
        description="one response id on two tenants' responses with one answer and different prompts is one answer "
        "handed over twice (a response cache keyed wrongly): its owner is the one whose usage it carries (ADR 0031), "
        "else the prompt it quotes, else the earlier receiver",
    )
    mixup_history: bool = Field(
        default=True,
        description="a turn whose prompt carries an answer delivered earlier to another session, and next to none of "
        "the answer its own session was given last, was sent with another conversation's history (a history store "
        "keyed wrongly): a high finding naming that session's tenant (ADR 0023)",
    )
    mixup_identifiers: bool = Field(
        default=True,
        description="an answer holding numbers (order, phone, account) of another tenant's exchange in flight or "
        "answered just before (mixup_copy_before_s), more than of its own prompt's, that no third tenant wrote in the "
        "window and no shared passage holds, answers that tenant (KV handed to the wrong request, batch results "
        "joined by offset, a cache): a high finding naming its tenant (ADR 0027)",
    )
    mixup_counts: bool = Field(
        default=True,
        description="where gateway and engine count alike, a response whose usage counts another request's prompt got "
        "its answer: two crossed, high on both (ADR 0029); or that request lost its own answer (ADR 0031)",
    )
    mixup_clock_skew_s: float = Field(
        default=5.0,
        ge=0,
        le=60,
        description="how far the clocks that stamp two exchanges' events may disagree (a gateway's, another pool's "
        "engine): an answer holding another tenant's numbers is still that tenant's when the owner's request is "
        "stamped up to this long after the answer was delivered (mixup_identifiers; ADR 0027, stop 65)",
    )
    mixup_min_identifiers: int = Field(
        default=2, ge=1, le=64, description="numbers of another tenant's exchange such an answer must hold (ADR 0027)"
    )
    mixup_session_horizon_s: float = Field(
        default=14_400.0,
        ge=0,
        le=7 * 86_400,
        description="event time a conversation's latest answer is kept for the history check after the ledger's "
        "window let it go: a turn after a pause this long is still judged (0: only within mixup_window_s; ADR 0026)",
    )
    mixup_session_max: int = Field(
        default=8192, ge=1, le=1_000_000, description="conversations whose latest answer a domain keeps (ADR 0026)"
    )
    mixup_session_prints: int = Field(
        default=1_000_000,
        ge=1,
        description="output and prompt fingerprints those latest answers hold (8 bytes each; with mixup_max_prints, "
        "a ledger copied whole must fit one changelog message: ADR 0026)",
    )
    # The session-incremental fingerprinting cache (detectors/session_prints.py): a cache, never state.
    session_cache_prints: int = Field(
        default=1_000_000,
        ge=0,
        description="fingerprints the session cache holds (~70 bytes each; 0 turns it off); a Kafka worker's "
        "partitions share one cache, so this bounds the process",
    )
    session_cache_sessions: int = Field(default=20_000, ge=1, description="sessions the session cache holds")
    mixup_max_deliveries: int = Field(default=2048, ge=1, le=1_000_000, description="deliveries a domain keeps")
    mixup_max_prints: int = Field(
        default=2_000_000, ge=1, description="output and prompt fingerprints a domain's deliveries hold (8 bytes each)"
    )
    mixup_min_matches: int = Field(
        default=4,
        ge=2,
        description="uncommon fingerprints each direction of a swap needs, and a copy's two outputs at least share",
    )
    mixup_copy_share: float = Field(
        default=0.6, gt=0, le=1, description="share of the shorter output two outputs share to be one answer (copy)"
    )
    # Long-horizon commonness (detectors/commonness.py): Bloom filters over (fingerprint, tenant) pairs.
    spread_bits_log2: int = Field(
        default=21, ge=10, le=34, description="bits per filter = 2**this (4 filters x 2 generations)"
    )
    spread_capacity: int = Field(
        default=200_000, ge=1000, description="pairs per generation (false-positive rate <= 1 % at the default)"
    )
    spread_epoch_s: float = Field(default=3 * 86400.0, gt=0, description="a generation lasts at most this long")
    common_min_sessions: int = Field(
        default=2,
        ge=0,
        le=3,
        description="a fingerprint in this many sessions' outputs that no prompt introduced first is the model's stock "
        "phrase, not evidence (0: off; docs/adr/0004, precision)",
    )
    model_spread_bits_log2: int = Field(
        default=21,
        ge=10,
        le=34,
        description="bits per filter of each domain's record of the model's stock phrases (sessions' outputs)",
    )
    fleet_bits_log2: int = Field(
        default=23,
        ge=10,
        le=34,
        description="bits per filter of the fleet record (what the model wrote in which sessions, and what prompts "
        "authored, over every domain: detectors/fleet.py); 8 MiB per judge table at 23",
    )
    fleet_capacity: int = Field(
        default=800_000,
        ge=1000,
        description="session-fingerprint pairs per generation of the fleet record "
        "(false-positive rate <= 1 % at the default bits)",
    )
    fleet_mixups: bool = Field(
        default=True,
        description="find delivery mix-ups across cache domains where the fleet record learns (a gateway hands a "
        "response to a client of any pool: detectors/fleet_mixup.py); raised fleet_delay_s after the exchange",
    )
    fleet_delay_s: float = Field(
        default=30.0,
        ge=0,
        le=3600,
        description="event time after which the fleet record learns an exchange: within it, a Kafka partition hears "
        "the other partitions' exchanges in time to learn them where one process would (detectors/fleet.py)",
    )
    fleet_pending_hashes: int = Field(
        default=4_000_000,
        ge=0,
        description="fingerprints of exchanges waiting their delay, at most (32 MB); beyond it the oldest is learned "
        "early",
    )
    max_tainted: int = Field(
        default=200_000, ge=0, description="fingerprints of flagged leaks remembered so re-sends stay attributable"
    )

    # Per-domain inputs are re-sorted by event time within this lateness, so that the order in which
    # partitions deliver them cannot change a verdict. It delays alerts by as much event time, so the
    # default is 0 (speak at once); raise it where partitions lag each other by seconds.
    domain_lateness_s: float = Field(default=0.0, ge=0)

    # Hostile input (docs/security.md "Hostile input").
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
    max_canaries: int = Field(default=100_000, ge=1, description="canary markers remembered (oldest evicted)")
    domain_idle_s: float = Field(
        default=3600.0, gt=0, description="a cache domain with no input for this long (event time) is dropped"
    )
    max_domains: int = Field(
        default=10_000, ge=1, description="cache domains held at once; the least recently active is evicted"
    )

    # Trust across senders (docs/security.md): set by the OTLP receiver with tokens, by hand on its Kafka workers.
    scoped_request_ids: bool = Field(
        default=False,
        description="request ids are <sender>/<id> (crosstalk otlp with otlp.tokens): a finding resting on content "
        "another sender carried is at most high, whatever the responding sender's figures claim",
    )

    # Incidents (Alertmanager-style grouping).
    incident_quiet_s: float = Field(default=600.0, gt=0, description="an incident resolves after this much quiet")
    max_request_ids_per_incident: int = Field(default=100_000, ge=1)
    incident_min_responses: int = Field(
        default=2,
        ge=1,
        description="distinct responses alerted high or critical on content alone that make their incident high: "
        "until then it is a warning (its alerts keep their own severity, the scope of a disclosure); a canary or a "
        "mechanism signal makes it high at once. 1: every high alert pages (docs/adr/0018)",
    )
