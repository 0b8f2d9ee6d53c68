"""Deployment shapes and the tenant catalogue of blind-v4 (README.md, "Shapes")."""

from __future__ import annotations

from dataclasses import dataclass, field

# tenant id -> (language, kind). kind: chat, agent (tool calls), code (agent on a repository), probe (canaries), batch.
TENANTS: dict[str, tuple[str, str]] = {
    "studio-ferraris-it": ("it", "chat"),
    "havenlogistiek-nl": ("nl", "chat"),
    "vardcentral-sv": ("sv", "chat"),
    "kuntapalvelu-fi": ("fi", "chat"),
    "pojistovna-cs": ("cs", "chat"),
    "dunabank-hu": ("hu", "chat"),
    "laoseis-et": ("et", "chat"),
    "jadran-turizam-hr": ("hr", "chat"),
    "harbor-helpdesk-en": ("en", "chat"),
    "ledgerline-en": ("en", "batch"),
    "fjord-agent-sv": ("sv", "agent"),
    "gopher-forge": ("go", "code"),
    "webkit-labs": ("js", "code"),
    "probe-synthetic": ("en", "probe"),
    "katalog-cs": ("cs", "batch"),
}


@dataclass(frozen=True)
class Shape:
    name: str
    start_ts: float
    duration_s: float
    tenants: tuple[str, ...]
    pools: tuple[str, ...]
    models: tuple[str, ...]
    context_window: int
    sessions_per_hour: float  # chat/agent/code sessions over all tenants, at the diurnal peak
    diurnal: bool = False
    streaming: float = 0.7  # share of chat requests streamed (they report ttft_ms)
    disaggregated: bool = False  # prefill/decode pools: cache_stats of both roles; responses name the decode pool
    batch_jobs: int = 0
    batch_size: tuple[int, int] = (20, 60)
    response_cache: bool = False  # the gateway answers repeated questions from its own cache
    stats_every_s: float = 15.0
    probe_every_s: float = 90.0
    leaks: dict[str, int] = field(default_factory=dict)
    description: str = ""


_DAY = 1772431200.0  # 2026-03-02T06:00:00Z

SHAPES: dict[str, Shape] = {
    "eurodesk": Shape(
        name="eurodesk",
        start_ts=_DAY,
        duration_s=4 * 3600,
        tenants=(
            "studio-ferraris-it",
            "havenlogistiek-nl",
            "vardcentral-sv",
            "kuntapalvelu-fi",
            "pojistovna-cs",
            "dunabank-hu",
            "laoseis-et",
            "jadran-turizam-hr",
            "harbor-helpdesk-en",
            "probe-synthetic",
        ),
        pools=("eu-west-a", "eu-west-b", "eu-north-a", "eu-central-a"),
        models=("mistral-small-3.1-24b-instruct", "llama-3.1-8b-instruct"),
        context_window=32768,
        sessions_per_hour=420,
        diurnal=True,
        response_cache=True,
        leaks={
            "placeholder_stale_kv": 6,
            "prefix_block_shared": 8,
            "stream_splice": 7,
            "response_cache_unscoped": 6,
            "conversation_key_collision": 6,
            "draft_slot_bleed": 5,
        },
        description="European customer-service SaaS: nine languages, four unified pools, a morning ramp, "
        "streaming chat, a gateway response cache, a synthetic prober",
    ),
    "agentforge": Shape(
        name="agentforge",
        start_ts=_DAY + 86400 + 3 * 3600,
        duration_s=2 * 3600,
        tenants=(
            "gopher-forge",
            "webkit-labs",
            "fjord-agent-sv",
            "harbor-helpdesk-en",
            "pojistovna-cs",
            "probe-synthetic",
        ),
        pools=("agents-a", "agents-b"),
        models=("qwen3-coder-30b-a3b-instruct", "gpt-oss-20b"),
        context_window=131072,
        sessions_per_hour=125,
        streaming=0.9,
        leaks={
            "tool_result_misroute": 10,
            "conversation_key_collision": 7,
            "prefix_block_shared": 6,
            "placeholder_stale_kv": 4,
            "stream_splice": 5,
        },
        description="coding and operations agents: long sessions with tool calls, large contexts, two pools",
    ),
    "nightbatch": Shape(
        name="nightbatch",
        start_ts=_DAY + 2 * 86400 + 16 * 3600,
        duration_s=3 * 3600,
        tenants=(
            "ledgerline-en",
            "katalog-cs",
            "dunabank-hu",
            "havenlogistiek-nl",
            "jadran-turizam-hr",
            "studio-ferraris-it",
            "probe-synthetic",
        ),
        pools=("pd-east", "pd-west"),
        models=("llama-3.3-70b-instruct",),
        context_window=65536,
        sessions_per_hour=110,
        streaming=0.3,
        disaggregated=True,
        batch_jobs=26,
        batch_size=(25, 70),
        stats_every_s=20.0,
        leaks={
            "batch_offset_shift": 12,
            "kv_handoff_mismatch": 10,
            "placeholder_stale_kv": 4,
            "draft_slot_bleed": 4,
            "prefix_block_shared": 4,
        },
        description="overnight batch API jobs beside light online chat on prefill/decode-disaggregated pools",
    ),
    "quick": Shape(
        name="quick",
        start_ts=_DAY + 3 * 86400,
        duration_s=480,
        tenants=("studio-ferraris-it", "kuntapalvelu-fi", "harbor-helpdesk-en", "probe-synthetic"),
        pools=("q-pool",),
        models=("llama-3.1-8b-instruct",),
        context_window=16384,
        sessions_per_hour=400,
        probe_every_s=40.0,
        leaks={"placeholder_stale_kv": 1, "prefix_block_shared": 1, "conversation_key_collision": 1},
        description="a few minutes of one pool, for tests",
    ),
}
