"""The deployment of one run: tenants of very different sizes, KV pools, and the fault windows (leak episodes)."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from streams.sim.blind2 import corpus, phrases
from streams.sim.blind2.shapes import LEAK_CLASSES, MODELS, SHAPES

WARMUP_SHARE = 0.25  # no leak before a quarter of the run
# Fault window length (s) at full scale, and the share of eligible responses a fault hits while it lasts.
WINDOW_S = {
    "misroute": 150, "swap": 150, "interleave": 120, "stale_kv": 480,
    "prefix_collision": 240, "page_splice": 300, "cross_session": 240,
}  # fmt: skip
HIT_RATE = {
    "misroute": 0.04, "swap": 0.025, "interleave": 0.03, "stale_kv": 1.0,
    "prefix_collision": 0.06, "page_splice": 0.08, "cross_session": 0.05,
}  # fmt: skip
DOMAIN_SCOPED = ("stale_kv", "prefix_collision", "page_splice")
CAUSE = {
    "misroute": "gateway response router delivers a finished completion to a second client (connection reuse)",
    "swap": "gateway correlates two concurrent completions with each other's connections",
    "interleave": "streaming proxy writes SSE chunks of two concurrent streams into each other's sockets",
    "stale_kv": "prompt over the context window aborted, placeholder forwarded; decode reads freed pages",
    "prefix_collision": "prefix-cache block hash collision: a prompt decoded on another tenant's cached prefix",
    "page_splice": "a KV page freed and reused while still referenced: one page of another request spliced in",
    "cross_session": "tenant-level response cache keyed without the session: another user's answer returned",
}
STEMS = {
    "en": ["northwind", "brightpath", "ledgerly", "cobalt", "harbor", "pinegrove", "quillon", "meridian", "tallyho"],
    "ko": ["hanbit", "mirae", "saebom", "dasom", "nuri", "haeorum", "gaon", "bitna"],
    "ja": ["sakura", "hikari", "kaede", "tsubame", "minato", "yamabuki"],
    "zh": ["jinhua", "longmen", "xinyu", "tianhe", "qingshan", "huaxia"],
    "ru": ["sever", "volna", "kedr", "zarya", "rassvet", "bereg"],
    "fr": ["lumiere", "ondine", "bastide", "mistral", "garance", "olivier"],
    "es": ["alameda", "brisa", "sierra", "marea", "olivo", "candela"],
    "pt": ["aurora", "ipe", "jacaranda", "caju", "cerrado", "mare"],
    "code": ["devforge", "stackyard", "bitmill", "lintly", "patchbay", "gitwise", "buildkite", "typeforge"],
}
SUFFIX = {"chat": "support", "rag": "docs", "agent": "agents", "translate": "l10n", "code": "ide", "summarise": "notes"}
ORG_KIND = ("clinic network", "online school", "logistics company", "insurance broker", "retail bank", "travel agency")


@dataclass
class Tenant:
    id: str
    weight: float
    lang: str  # "code" for code assistants
    explain_lang: str  # the language a code tenant's users write prose in (= lang otherwise)
    app: str
    pools: list[str]
    sessions: bool  # the client sends a session id (x-session-affinity)
    json_log: bool  # the gateway logs the messages array as JSON
    template: str | None  # name of the shared vendor template, or None for an own system prompt
    system: str
    tools: list[dict[str, Any]] = field(default_factory=list)
    max_output_tokens: int | None = None
    rate_limit_10s: int = 20


@dataclass
class Pool:
    name: str
    model: str
    context_window: int
    capacity_tokens: int
    weight: float


@dataclass
class Fault:
    id: str
    kind: str
    scope: str  # "gateway" or a cache domain
    start: float
    end: float
    hit_rate: float


@dataclass
class World:
    shape: str
    seed: int
    t0: float
    duration_s: float
    warmup_end: float
    rate_rps: float
    cache_stats_s: float
    tenants: list[Tenant]
    pools: dict[str, Pool]
    faults: list[Fault]

    def as_json(self) -> dict[str, Any]:
        return {
            "profile": "blind-v2",
            "shape": self.shape,
            "seed": self.seed,
            "start_ts": self.t0,
            "duration_s": self.duration_s,
            "warmup_end_ts": self.warmup_end,
            "rate_rps": self.rate_rps,
            "pools": [vars(p) for p in self.pools.values()],
            "tenants": [{k: v for k, v in vars(t).items() if k not in ("system", "tools")} for t in self.tenants],
            "fault_windows": [vars(f) | {"cause": CAUSE[f.kind]} for f in self.faults],
        }


def _tools(rng: random.Random, tenant: str) -> list[dict[str, Any]]:
    verbs = ["search", "get", "update", "create", "cancel", "list"]
    nouns = ["orders", "tickets", "invoices", "appointments", "shipments", "accounts", "documents", "refunds"]
    out = []
    for noun in rng.sample(nouns, 3):
        verb = rng.choice(verbs)
        out.append(
            {
                "name": f"{verb}_{noun}",
                "description": f"{verb.capitalize()} {noun} in the {tenant} back office.",
                "parameters": {
                    "type": "object",
                    "properties": {"query": {"type": "string"}, "limit": {"type": "integer", "default": 10}},
                    "required": ["query"],
                },
            }
        )
    return out


def _pick(rng: random.Random, weights: dict[str, float]) -> str:
    keys = list(weights)
    return rng.choices(keys, [weights[k] for k in keys])[0]


def _mix(rng: random.Random, n: int, langs: dict[str, float], apps: dict[str, float]) -> tuple[list[str], list[str]]:
    """Each tenant's language and application, largest tenant first: the majority language leads, and every
    language and application of the shape has at least one tenant (the smallest ones take what is missing)."""
    out_l = [max(langs, key=lambda k: langs[k])] + [_pick(rng, langs) for _ in range(n - 1)]
    for i, lang in zip(range(n - 1, 0, -1), [x for x in langs if x not in out_l], strict=False):
        out_l[i] = lang
    nl = [i for i, x in enumerate(out_l) if x != "code"]
    out_a = ["code" if x == "code" else _pick(rng, apps) for x in out_l]
    fixed = ["chat", "rag", "summarise"] + [a for a in apps if a not in ("chat", "rag", "summarise")]
    head, tail = nl[:3], nl[3:][::-1]
    for i, app in zip(head + tail, fixed, strict=False):
        out_a[i] = app
    return out_l, out_a


def build(shape_name: str, seed: int) -> World:
    shape = SHAPES[shape_name]
    rng = random.Random(f"blind-v2/{shape_name}/{seed}/world")
    t0 = datetime.fromisoformat(shape["start"]).timestamp() + rng.randrange(0, 600)
    duration = float(shape["duration_s"])
    pools = {}
    for name, model_key, weight in shape["pools"]:
        model, window = MODELS[model_key]
        pools[name] = Pool(name, model, window, rng.choice((262_144, 524_288, 1_048_576)), weight)
    n = shape["tenants"]
    raw_w = [1.0 / (i + 1) ** shape["size_skew"] for i in range(n)]
    total = sum(raw_w)
    tenants: list[Tenant] = []
    used: set[str] = set()
    apps_nl = {k: v for k, v in shape["apps"].items() if k != "code"}
    load = {p: 0.0 for p in pools}
    langs, apps = _mix(rng, n, shape["langs"], apps_nl)
    for i in range(n):
        lang, app = langs[i], apps[i]
        explain = rng.choice(["en", "en", "en", "ko", "zh", "ja", "ru"]) if lang == "code" else lang
        stem = rng.choice(STEMS[lang])
        tid = f"{stem}-{SUFFIX[app]}" if rng.random() < 0.75 else f"acct-{rng.getrandbits(24):06x}"
        while tid in used:
            tid = f"{stem}-{SUFFIX[app]}-{rng.randrange(2, 99)}"
        used.add(tid)
        coder = [p for p in pools if "coder" in p]
        general = [p for p in pools if "coder" not in p] or list(pools)
        choices = coder if app == "code" and coder else general
        share = raw_w[i] / total
        home = min(choices, key=lambda p: ((load[p] + share) / pools[p].weight, rng.random()))
        load[home] += share
        mine = [home]
        same_model = [p for p in choices if p != home and pools[p].model == pools[home].model]
        if i < 3 and same_model:
            mine.append(same_model[0])  # the biggest tenants are spread over two replicas
        template = {"chat": "helpdesk-kit", "rag": "rag-kit", "agent": "agent-kit"}.get(app)
        if template and rng.random() < 0.35:
            template = None
        org = f"{stem.capitalize()} {rng.choice(ORG_KIND)}"
        system = phrases.OWN_SYSTEM.format(
            bot=rng.choice(phrases.BOTS),
            org=org,
            style=rng.choice(phrases.STYLES),
            language=corpus.LANG_NAMES.get(explain, "English"),
        )
        tools = _tools(rng, stem) if app == "agent" else []
        if template == "helpdesk-kit":
            system = phrases.HELPDESK_KIT
        elif template == "agent-kit":
            system = phrases.AGENT_KIT.format(tools=json.dumps(tools, indent=1))
        tenants.append(
            Tenant(
                id=tid,
                weight=share,
                lang=lang,
                explain_lang=explain,
                app=app,
                pools=mine,
                sessions=app in ("chat", "code", "agent") or rng.random() < 0.3,
                json_log=rng.random() < 0.7,
                template=template,
                system=system,
                tools=tools,
                max_output_tokens=rng.choice((None, 512, 1024, 2048, 4096)),
                rate_limit_10s=max(8, int(share * shape["rate_rps"] * 10 * 4)),
            )
        )
    warmup_end = t0 + duration * WARMUP_SHARE
    faults = _faults(rng, shape, tenants, pools, t0, duration, warmup_end)
    return World(
        shape_name, seed, t0, duration, warmup_end, shape["rate_rps"], shape["cache_stats_s"], tenants, pools, faults
    )


def _faults(
    rng: random.Random,
    shape: dict[str, Any],
    tenants: list[Tenant],
    pools: dict[str, Pool],
    t0: float,
    duration: float,
    warmup_end: float,
) -> list[Fault]:
    """The fault windows of every leak class, after the warm-up (split out of `build`, same draws in the same order:
    the profile's bytes are unchanged)."""
    scale = min(1.0, max(0.25, duration / 2400))
    faults = []
    for kind in LEAK_CLASSES:
        for _ in range(shape["episodes"][kind]):
            length = WINDOW_S[kind] * scale * rng.uniform(0.8, 1.2)
            start = rng.uniform(warmup_end + 5, t0 + duration - length - 15)
            scope = "gateway"
            if kind in DOMAIN_SCOPED:
                members = {p: [t for t in tenants if p in t.pools] for p in pools}
                names = [p for p, ts in members.items() if len(ts) >= 2]
                if kind == "stale_kv":
                    names = [p for p in names if any(t.app in ("summarise", "rag", "chat") for t in members[p])]
                names = names or [p for p, ts in members.items() if ts]
                scope = rng.choices(names, [pools[p].weight for p in names])[0]
            faults.append(Fault("", kind, scope, round(start, 3), round(start + length, 3), HIT_RATE[kind]))
    faults.sort(key=lambda f: f.start)
    for i, f in enumerate(faults):
        f.id = f"F{i + 1:02d}"
    return faults
