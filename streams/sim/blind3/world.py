"""blind-v3's deployment shapes and the tenants, pools and fault windows drawn for one seed."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from streams.sim.blind3 import data
from streams.sim.blind3.text import TenantText

CRATES = ("smallvec-1.13.2", "humantime-2.2.0", "hex-0.4.3", "itoa-1.0.15")
VENDOR = {"support": "deskpilot", "records": "formflow", "chat": "buddy", "code": "codemate", "l10n": "lingo",
          "docs": "docsearch", "probe": ""}  # fmt: skip
MAX_OUT = {"support": 1024, "records": 2048, "chat": 512, "code": 4096, "l10n": 2048, "docs": 1024, "probe": 64}


@dataclass(frozen=True)
class Pool:
    name: str
    role: str  # unified, prefill or decode
    model: str
    capacity_tokens: int
    context_window: int
    tokens_per_s: float  # decode speed of one stream


@dataclass(frozen=True)
class Fault:
    leak_class: str
    start: float  # fractions of the run
    end: float
    pools: tuple[str, ...] = ()  # empty: every decoding pool
    rate: float = 0.05  # share of eligible requests hit inside the window


@dataclass(frozen=True)
class Shape:
    name: str
    about: str
    start_ts: float
    duration_s: float
    rate: float  # mean requests per second
    tenants: int
    langs: dict[str, float]
    kinds: dict[str, float]
    pools: tuple[Pool, ...]
    faults: tuple[Fault, ...]
    otel: bool = False  # prompts as JSON message arrays, trace context, RFC 3339 times
    stats_every_s: float = 15.0
    probes: int = 1
    prompt_cap: int = 24_000  # characters of prompt text the gateway logs


@dataclass
class Tenant:
    tenant_id: str
    text: TenantText
    weight: float
    pools: list[str]
    overlong_rate: float
    lang_label: str  # for the labels: a language code, or "code"
    sessions: list[tuple[str, list[tuple[str, str]]]] = field(default_factory=list)


def _pool(name: str, role: str, model: str, cap: int, ctx: int, tps: float) -> Pool:
    return Pool(name, role, model, cap, ctx, tps)


_QWEN = "Qwen3-235B-A22B-Instruct-2507-FP8"
_LLAMA = "Llama-3.3-70B-Instruct"
_GEMMA = "gemma-3-27b-it"
_MISTRAL = "Mistral-Small-3.2-24B-Instruct-2506"
_KINDS_EU = {"support": 0.34, "records": 0.18, "chat": 0.16, "code": 0.14, "l10n": 0.08, "docs": 0.10}
_KINDS_APAC = {"support": 0.30, "records": 0.14, "chat": 0.26, "code": 0.10, "l10n": 0.10, "docs": 0.10}

SHAPES: dict[str, Shape] = {
    "eu-pd": Shape(
        "eu-pd",
        "prefill/decode-disaggregated cluster of one MoE model serving EU helpdesk and back-office SaaS tenants",
        1_773_730_800.0,  # 2026-03-17T07:00:00Z
        45 * 60,
        2.0,
        26,
        {"de": 0.34, "pl": 0.22, "tr": 0.2, "uk": 0.14, "en": 0.10},
        _KINDS_EU,
        (
            *(_pool(f"eu-prefill-{x}", "prefill", _QWEN, 1_400_000, 131_072, 0) for x in "ab"),
            *(_pool(f"eu-decode-{i}", "decode", _QWEN, 2_600_000, 131_072, 38.0) for i in range(1, 5)),
        ),
        (
            Fault("connection_desync", 0.30, 0.36, ("eu-decode-2",), 0.08),
            Fault("placeholder_stale_kv", 0.42, 0.64, ("eu-decode-1", "eu-decode-3"), 1.0),
            Fault("session_history_mixup", 0.50, 0.90, (), 0.04),
            Fault("pd_kv_misdelivery", 0.66, 0.74, (), 0.03),
            Fault("stream_interleave", 0.78, 0.84, ("eu-decode-4",), 0.05),
            Fault("response_cache_collision", 0.86, 0.96, (), 0.05),
        ),
    ),
    "apac-otel": Shape(
        "apac-otel",
        "busy many-tenant fleet behind an OpenTelemetry GenAI gateway (message arrays, trace context), two models",
        1_774_328_400.0,  # 2026-03-24T05:00:00Z
        12 * 60,
        8.0,
        120,
        {"vi": 0.25, "id": 0.24, "hi": 0.15, "th": 0.12, "ar": 0.14, "en": 0.10},
        _KINDS_APAC,
        (
            *(_pool(f"sg-llama-{i}", "unified", _LLAMA, 1_100_000, 131_072, 42.0) for i in range(1, 6)),
            *(_pool(f"sg-gemma-{i}", "unified", _GEMMA, 700_000, 131_072, 55.0) for i in range(1, 4)),
        ),
        (
            Fault("response_cache_collision", 0.28, 0.44, (), 0.04),
            Fault("session_history_mixup", 0.35, 0.90, (), 0.03),
            Fault("stream_interleave", 0.40, 0.50, ("sg-llama-4",), 0.05),
            Fault("connection_desync", 0.52, 0.58, ("sg-llama-3",), 0.1),
            Fault("placeholder_stale_kv", 0.60, 0.80, ("sg-llama-1", "sg-gemma-2"), 1.0),
            Fault("prefix_hash_collision", 0.82, 0.96, ("sg-gemma-1",), 0.04),
        ),
        otel=True,
        stats_every_s=10.0,
        probes=2,
        prompt_cap=16_000,
    ),
    "levant-tiny": Shape(
        "levant-tiny",
        "tiny slow on-prem deployment: one GPU box shared by a few Hebrew- and Arabic-speaking business tenants",
        1_774_850_400.0,  # 2026-03-30T06:00:00Z
        3 * 3600,
        0.3,
        6,
        {"he": 0.45, "ar": 0.35, "en": 0.20},
        {"support": 0.35, "records": 0.25, "chat": 0.15, "code": 0.15, "docs": 0.10},
        (_pool("onprem-l40s-0", "unified", _MISTRAL, 420_000, 32_768, 24.0),),
        (
            Fault("session_history_mixup", 0.30, 0.90, (), 0.04),
            Fault("placeholder_stale_kv", 0.40, 0.70, (), 1.0),
            Fault("connection_desync", 0.75, 0.80, (), 0.04),
            Fault("prefix_hash_collision", 0.85, 0.95, (), 0.03),
        ),
        stats_every_s=30.0,
        prompt_cap=8_192,
    ),
    "quick": Shape(
        "quick",
        "small mixed deployment for tests",
        1_775_000_000.0,
        6 * 60,
        1.0,
        8,
        {"de": 0.3, "tr": 0.3, "ar": 0.2, "en": 0.2},
        {"records": 0.4, "support": 0.3, "chat": 0.2, "docs": 0.1},
        tuple(_pool(f"q-{i}", "unified", _LLAMA, 600_000, 131_072, 45.0) for i in (1, 2)),
        (
            Fault("placeholder_stale_kv", 0.40, 0.90, (), 1.0),
            Fault("connection_desync", 0.50, 0.70, (), 0.1),
            Fault("response_cache_collision", 0.60, 0.90, (), 0.3),
            Fault("stream_interleave", 0.70, 0.90, (), 0.08),
        ),
    ),
}
WARMUP_FRACTION = 0.25


def _kind(rng: random.Random, lang: str, kinds: dict[str, float]) -> str:
    allowed = {k: w for k, w in kinds.items() if not (k == "chat" and not data.dialogs(lang))}
    allowed = {k: w for k, w in allowed.items() if not (k == "l10n" and not data.ui_strings(lang))}
    return rng.choices(list(allowed), weights=list(allowed.values()))[0]


def _text(rng: random.Random, lang: str, kind: str, n: int) -> TenantText:
    ent = data.entities(lang)
    company = ent["company"][rng.randrange(len(ent["company"]))]
    agents = [ent["name"][rng.randrange(len(ent["name"]))] for _ in range(rng.randint(2, 6))]
    prefix = rng.choice(("", "A", "SO-", "#", "ORD-", f"{lang.upper()}-")) + (f"{n % 10}" if rng.random() < 0.5 else "")
    customers = rng.sample(range(len(ent["name"])), min(len(ent["name"]), rng.randint(25, 90)))
    crate = CRATES[n % len(CRATES)] if kind == "code" else None
    vendored = rng.random() < 0.5
    return TenantText(lang, kind, VENDOR[kind], company, agents, prefix, crate, vendored, customers, rng.randrange(997))


def tenants(shape: Shape, rng: random.Random) -> list[Tenant]:
    decoders = [p.name for p in shape.pools if p.role != "prefill"]
    by_model: dict[str, list[str]] = {}
    for p in shape.pools:
        if p.role != "prefill":
            by_model.setdefault(p.model, []).append(p.name)
    langs = list(shape.langs)
    out: list[Tenant] = []
    long_docs = 0
    for n in range(shape.tenants):
        lang = rng.choices(langs, weights=list(shape.langs.values()))[0] if n >= len(langs) else langs[n]
        kind = _kind(rng, lang, shape.kinds)
        tid = f"{rng.choice(('org', 'tn', 'acct'))}_{rng.getrandbits(40):010x}"
        weight = 1.0 / (1 + n) ** 0.8  # a few big tenants and a long tail
        # A tenant is on one model; the router spreads it over a few of that model's pools.
        same = by_model[rng.choice(sorted(by_model))]
        pools = rng.sample(same, min(rng.choice((1, 2, 2, 3)), len(same)))
        # Tenants that batch whole archives or repositories send over-long prompts often; the rest by mistake.
        overlong = 0.002
        if kind in ("records", "code") and (long_docs < 2 or rng.random() < 0.2):
            overlong, long_docs = 0.08, long_docs + 1
        label = "code" if kind == "code" else lang
        out.append(Tenant(tid, _text(rng, lang, kind, n), weight, pools, overlong, label))
    code = [t for t in out if t.text.kind == "code"]
    for t in code:
        peers = [c for c in code if c.text.crate == t.text.crate]
        t.text.share = (peers.index(t), len(peers))
    for i in range(shape.probes):
        tid = f"probe-{shape.name.split('-')[0]}-{i + 1}"
        text = TenantText("en", "probe", "", "probe", ["probe"], "")
        out.append(Tenant(tid, text, 0.0, decoders, 0.0, "en"))
    return out
