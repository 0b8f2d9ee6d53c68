"""The requests of one run as the service handled them before any fault: who asked what, where, and what came back."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from streams.sim.blind3.text import Turn, make_turn
from streams.sim.blind3.world import MAX_OUT, Pool, Shape, Tenant


def tokens(text: str) -> int:
    """A tokenizer's count, roughly: BPE vocabularies give Latin text about four characters a token and other
    scripts (Cyrillic, Arabic, Hebrew, Devanagari, Thai) one to two."""
    ascii_chars = sum(1 for c in text if ord(c) < 128)
    return max(1, round(ascii_chars / 4 + (len(text) - ascii_chars) / 1.7))


@dataclass
class Req:
    rid: str
    ts: float
    tenant: Tenant
    pool: Pool
    prefill: str | None
    session_id: str | None
    turn: Turn
    prompt_tokens: int
    max_out: int
    status: int = 200
    error_type: str | None = None
    output: str | None = None
    out_tokens: int = 0
    in_tokens: int = 0
    cached_tokens: int = 0
    ttft_ms: float = 0.0
    dur_ms: float = 0.0
    finish: str | None = "stop"
    response_id: str | None = None
    overlong: bool = False
    # what the labels say of it
    contaminated: bool = False
    leak_class: str | None = None
    leak_kind: str | None = None
    sources: dict[str, int] = field(default_factory=dict)  # tenant id -> leaked tokens
    source_lang: str | None = None
    passages: list[int] = field(default_factory=list)
    canary_markers: list[str] = field(default_factory=list)

    @property
    def end(self) -> float:
        return self.ts + self.dur_ms / 1000


def arrivals(shape: Shape, rng: random.Random) -> list[float]:
    """Poisson arrivals whose rate swings by a quarter over the run (load is never flat) by thinning."""
    peak = shape.rate * 1.25
    out: list[float] = []
    t = 0.0
    while True:
        t += rng.expovariate(peak)
        if t >= shape.duration_s:
            return out
        r = shape.rate * (1 + 0.25 * math.sin(2 * math.pi * t / max(shape.duration_s, 1) * 1.5 + 0.7))
        if rng.random() < r / peak:
            out.append(shape.start_ts + t)


def _session(t: Tenant, rng: random.Random) -> tuple[str | None, list[tuple[str, str]]]:
    if t.text.kind != "chat":
        return None, []
    open_ = [s for s in t.sessions if len(s[1]) < 2 * rng.randint(3, 12)]
    if open_ and rng.random() < 0.75:
        sid, hist = rng.choice(open_)
        return sid, hist
    sid = f"conv_{rng.getrandbits(64):016x}"
    t.sessions.append((sid, []))
    return sid, t.sessions[-1][1]


def _errors(r: Req, rng: random.Random) -> None:
    x = rng.random()
    if r.overlong:
        r.status, r.error_type = 400, "context_length_exceeded"
    elif x < 0.008:
        r.status, r.error_type = 429, "rate_limit_exceeded"
    elif x < 0.011:
        r.status, r.error_type = 503, "overloaded"
    elif x < 0.013:
        r.status, r.error_type = 500, "internal_server_error"
    elif x < 0.021:
        r.status, r.error_type = 499, "cancelled"
    if r.status != 200:
        r.output, r.finish, r.out_tokens = None, None, 0
        r.dur_ms = round(rng.uniform(5, 60) if r.status != 499 else rng.uniform(800, 9000), 1)
        r.ttft_ms = 0.0


def _outcome(r: Req, rng: random.Random, prefix_seen: set[tuple[str, str]]) -> None:
    turn = r.turn
    r.output = turn.output
    r.out_tokens = min(tokens(turn.output) + rng.randint(0, 3), r.max_out)
    r.finish = "length" if r.out_tokens >= r.max_out else "stop"
    r.in_tokens = r.prompt_tokens
    key = (r.pool.name, turn.system)
    # Block-granular prefix caching: the shared system prompt and the resent history hit whole 16-token blocks.
    hit = tokens(turn.system) if key in prefix_seen and turn.system else 0
    hit += sum(tokens(c) for _, c in turn.history)
    r.cached_tokens = min(r.prompt_tokens, hit) // 16 * 16
    prefix_seen.add(key)
    prefill_s = (r.prompt_tokens - r.cached_tokens) / rng.uniform(6000, 14000)
    handoff = rng.uniform(0.004, 0.03) if r.prefill else 0.0
    r.ttft_ms = round((rng.uniform(0.03, 0.35) + prefill_s + handoff) * 1000, 1)
    r.dur_ms = round(r.ttft_ms + r.out_tokens / (r.pool.tokens_per_s * rng.uniform(0.7, 1.15)) * 1000, 1)
    r.response_id = f"chatcmpl-{rng.getrandbits(96):024x}"


def _bulk(r: Req, cap: int, rng: random.Random) -> None:
    """The logged head of an over-long prompt: many of the tenant's documents, as far as the gateway keeps."""
    docs, size = [r.turn.user], len(r.turn.user)
    while size < cap:
        more = make_turn(r.tenant.text, rng, []).user
        docs.append(more)
        size += len(more) + 2
    r.turn.user = "\n\n".join(docs)
    r.turn.private.extend(docs[1:])


def build(shape: Shape, tenants_: list[Tenant], rng: random.Random) -> list[Req]:
    pools = {p.name: p for p in shape.pools}
    prefills = [p.name for p in shape.pools if p.role == "prefill"]
    active = [t for t in tenants_ if t.weight > 0]
    weights = [t.weight for t in active]
    probes = [t for t in tenants_ if t.weight == 0]
    times = arrivals(shape, rng)
    # Probers ask on a fixed beat, not with the traffic.
    beat = [(shape.start_ts + s, p) for p in probes for s in range(37, int(shape.duration_s), 60)]
    chosen = [(ts, rng.choices(active, weights)[0]) for ts in times] + beat
    chosen.sort(key=lambda x: (x[0], x[1].tenant_id))
    prefix_seen: set[tuple[str, str]] = set()
    out: list[Req] = []
    for n, (ts, t) in enumerate(chosen):
        sid, hist = _session(t, rng)
        turn = make_turn(t.text, rng, hist)
        pool = pools[rng.choice(t.pools)]
        text_len = tokens(turn.system) + tokens(turn.user) + sum(tokens(c) for _, c in turn.history)
        r = Req(f"req-{n:06d}-{rng.getrandbits(32):08x}", round(ts, 3), t, pool,
                rng.choice(prefills) if prefills else None, sid, turn, text_len + 12, MAX_OUT[t.text.kind])  # fmt: skip
        if rng.random() < t.overlong_rate:
            # A whole archive or repository pasted in: past the model's window, as the gateway counts it.
            r.overlong = True
            r.prompt_tokens = pool.context_window + rng.randint(1500, pool.context_window // 2)
            _bulk(r, shape.prompt_cap, rng)
        _outcome(r, rng, prefix_seen)
        _errors(r, rng)
        if sid is not None and r.output is not None:
            hist.extend([("user", turn.user), ("assistant", r.output)])
        out.append(r)
    return out
