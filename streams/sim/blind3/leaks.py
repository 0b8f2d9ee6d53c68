"""The fault windows' leaks, each after a real class of serving bug; see README.md, "Leak classes", for the reports.

Every class decides which of a response's fields travel with the leaked text (the body's usage, id and finish reason
when a whole body is misdelivered) and which stay the receiver's (the gateway's own timings and routing)."""

from __future__ import annotations

import random
import re
from bisect import bisect_left
from collections.abc import Callable

from streams.sim.blind3.phrases import PHRASES
from streams.sim.blind3.text import regenerate
from streams.sim.blind3.traffic import Req, tokens
from streams.sim.blind3.world import Fault, Shape

MARKER = re.compile(r"CTKP-[0-9a-f]{32}")
NO_CACHE = frozenset({"probe", "code", "l10n"})
STALE_S = 900.0  # how long freed KV pages of a finished request stay unoverwritten in a busy-enough pool


def _ok(r: Req) -> bool:
    return r.status == 200 and r.output is not None and not r.contaminated


def _fragment(text: str, rng: random.Random, lo: int, hi: int) -> str:
    """A run of `lo`..`hi` tokens of `text` from a random start, cut at word (for unspaced scripts, character)
    boundaries: pages hold token runs, and a run cut mid-word is still that text."""
    spaced = text.count(" ") > len(text) / 40
    units = text.split(" ") if spaced else list(text)
    sep = " " if spaced else ""
    want = rng.randint(lo, hi)
    a = rng.randrange(len(units))
    b, got = a, 0
    while b < len(units) and got < want:
        got += tokens(units[b] + sep)
        b += 1
    while a > 0 and got < want:
        a -= 1
        got += tokens(units[a] + sep)
    return sep.join(units[a:b]).strip()


def _mark(r: Req, cls: str, pieces: list[tuple[Req, str]], kind: str = "cross_tenant") -> None:
    r.contaminated, r.leak_class, r.leak_kind = True, cls, kind
    for src, text in pieces:
        n = tokens(text)
        r.sources[src.tenant.tenant_id] = r.sources.get(src.tenant.tenant_id, 0) + n
        r.passages.append(n)
        r.canary_markers.extend(m for m in MARKER.findall(text) if m == src.turn.canary)
    top = max(r.sources, key=lambda k: (r.sources[k], k))
    r.source_lang = next(s.tenant.lang_label for s, _ in pieces if s.tenant.tenant_id == top)


def _deliver_body(r: Req, src: Req, rng: random.Random) -> None:
    """`src`'s whole body to `r`: its text, usage, id and finish reason; the gateway's clock is `r`'s own."""
    r.output, r.out_tokens, r.in_tokens = src.turn.output, src.out_tokens, src.in_tokens
    r.cached_tokens, r.response_id, r.finish = src.cached_tokens, src.response_id, src.finish
    r.ttft_ms = round(rng.uniform(6, 60), 1)
    r.dur_ms = round(r.ttft_ms + rng.uniform(5, 240), 1)


def connection_desync(reqs: list[Req], w: list[Req], f: Fault, rng: random.Random) -> None:
    """A client gives up after the upstream read began; the pooled connection goes back with the answer unread and
    the next request on it reads that answer (redis-py's cancelled-command bug behind the March 2023 ChatGPT
    history leak; the same shape in HTTP keep-alive pools). The chain shifts by one or two."""
    for i, s in enumerate(w):
        if not _ok(s) or rng.random() >= f.rate:
            continue
        chain = [r for r in w[i + 1 : i + 8] if r.pool.name == s.pool.name and r.ts - s.ts < 6 and _ok(r)]
        # Each read takes the body queued before it: the cancelled one's, then the one that read it, and so on.
        bodies = [(s, s.turn.output, s.out_tokens, s.in_tokens, s.cached_tokens, s.response_id, s.finish)]
        s.status, s.error_type, s.output, s.finish = 499, "cancelled", None, None
        for r in chain[: rng.choice((1, 1, 2))]:
            src, body, out_t, in_t, cached, rid, finish = bodies[-1]
            if r.tenant.tenant_id == src.tenant.tenant_id:
                break
            bodies.append((r, r.turn.output, r.out_tokens, r.in_tokens, r.cached_tokens, r.response_id, r.finish))
            r.output, r.out_tokens, r.in_tokens, r.cached_tokens = body, out_t, in_t, cached
            r.response_id, r.finish = rid, finish
            r.ttft_ms = round(rng.uniform(6, 60), 1)
            r.dur_ms = round(r.ttft_ms + rng.uniform(5, 240), 1)
            _mark(r, "connection_desync", [(src, body)])


def response_cache_collision(reqs: list[Req], w: list[Req], f: Fault, rng: random.Random) -> None:
    """A gateway's semantic response cache keyed on the prompt's meaning, not on who asks (LiteLLM/GPTCache-style
    caches shared across API keys): a similar question of another tenant of the same product gets the cached
    answer, with the cached id and usage, in milliseconds."""
    cache: dict[tuple[str, str, str], Req] = {}
    for r in w:
        key = (r.tenant.text.kind, r.tenant.lang_label, r.pool.model)
        hit = cache.get(key)
        # Only formulaic questions land near enough to another tenant's in embedding space; pasted code does not.
        other = hit is not None and hit.tenant.tenant_id != r.tenant.tenant_id
        fresh = hit is not None and r.ts - hit.end < 600
        if hit and other and fresh and _ok(r) and r.tenant.text.kind not in NO_CACHE and rng.random() < f.rate:
            _deliver_body(r, hit, rng)
            _mark(r, "response_cache_collision", [(hit, hit.turn.output)])
            continue
        if _ok(r):
            cache[key] = r


def _stale_sources(reqs: list[Req], ends: list[float], r: Req) -> list[Req]:
    lo = bisect_left(ends, r.ts - STALE_S)
    hi = bisect_left(ends, r.ts)
    pool = r.pool.name
    return [s for s in reqs[lo:hi] if s.pool.name == pool and s.output is not None and s.turn.private]


def placeholder_stale_kv(reqs: list[Req], w: list[Req], f: Fault, rng: random.Random) -> None:
    """The incident: a prompt past the context window is cut to a one-token placeholder that is still scheduled;
    its decode reads KV pages freed by earlier requests (any tenant's) and the output, HTTP 200, is their text."""
    done = sorted((s for s in reqs if s.status == 200), key=lambda s: s.end)
    ends = [s.end for s in done]
    for r in w:
        if not r.overlong:
            continue
        stale = [s for s in _stale_sources(done, ends, r) if s.tenant.tenant_id != r.tenant.tenant_id]
        if not stale:
            continue
        picked = rng.sample(stale[-40:], min(len(stale[-40:]), rng.choice((1, 2, 2, 3))))
        pieces = [(s, _fragment(rng.choice(s.turn.private), rng, 10, 110)) for s in picked for _ in range(2)]
        pieces = [p for p in pieces if p[1]]
        parts = [p[1] for p in pieces]
        if rng.random() < 0.5 and picked[0].turn.system:
            # Pages of a shared system prompt are as stale as the rest; they are no tenant's secret.
            parts.insert(rng.randrange(len(parts) + 1), _fragment(picked[0].turn.system, rng, 8, 40))
        r.status, r.error_type, r.output = 200, None, rng.choice((" ", "\n", "")).join(parts)
        r.out_tokens = tokens(r.output)
        r.in_tokens, r.cached_tokens, r.finish = 1, 0, rng.choice(("stop", "length"))
        r.ttft_ms = round(rng.uniform(18, 90), 1)
        r.dur_ms = round(r.ttft_ms + r.out_tokens / r.pool.tokens_per_s * 1000, 1)
        r.response_id = f"chatcmpl-{rng.getrandbits(96):024x}"
        _mark(r, "placeholder_stale_kv", pieces)


def stream_interleave(reqs: list[Req], w: list[Req], f: Fault, rng: random.Random) -> None:
    """Two concurrent SSE streams through a proxy that reuses a chunk buffer across connections (reports against
    streaming proxies and engines' output processors under concurrency): each stream gets a burst of the other's
    chunks. Ids, usage and timing stay each stream's own."""
    for i, r in enumerate(w):
        if not _ok(r) or rng.random() >= f.rate:
            continue
        peers = [s for s in w[i + 1 : i + 30] if _ok(s) and s.pool.name == r.pool.name and s.ts < r.end]
        peers = [s for s in peers if s.tenant.tenant_id != r.tenant.tenant_id and s.turn.private]
        if not peers or not r.turn.private:
            continue
        s = rng.choice(peers)
        a_out, b_out = r.output or "", s.output or ""
        a_piece, b_piece = _fragment(b_out, rng, 8, 60), _fragment(a_out, rng, 8, 60)
        if not a_piece or not b_piece:
            continue
        cut_a, cut_b = rng.randrange(len(a_out) + 1), rng.randrange(len(b_out) + 1)
        r.output = a_out[:cut_a] + a_piece + a_out[cut_a:]
        s.output = b_out[:cut_b] + b_piece + b_out[cut_b:]
        _mark(r, "stream_interleave", [(s, a_piece)])
        _mark(s, "stream_interleave", [(r, b_piece)])


def _answer_for(r: Req, src: Req, rng: random.Random, cls: str) -> None:
    text = regenerate(src.tenant.text, src.turn, rng)
    r.output = text
    r.out_tokens = tokens(text)
    r.dur_ms = round(r.ttft_ms + r.out_tokens / r.pool.tokens_per_s * 1000, 1)
    _mark(r, cls, [(src, text)])


def prefix_hash_collision(reqs: list[Req], w: list[Req], f: Fault, rng: random.Random) -> None:
    """Prefix-cache blocks found by a hash that is not salted per tenant and can collide (vLLM's CVE-2025-25183
    on Python's hash of None-seeded blocks): the prompt is served from another request's KV blocks and the model
    answers that request's prompt. The engine counts the blocks as cached."""
    for i, r in enumerate(w):
        if not _ok(r) or rng.random() >= f.rate:
            continue
        prior = [s for s in w[max(0, i - 40) : i] if s.pool.name == r.pool.name and s.output is not None]
        prior = [s for s in prior if s.tenant.tenant_id != r.tenant.tenant_id and s.turn.private]
        if not prior:
            continue
        src = rng.choice(prior)
        r.cached_tokens = max(r.cached_tokens, int(r.prompt_tokens * rng.uniform(0.6, 0.95)) // 16 * 16)
        r.ttft_ms = round(rng.uniform(25, 120), 1)
        _answer_for(r, src, rng, "prefix_hash_collision")


def pd_kv_misdelivery(reqs: list[Req], w: list[Req], f: Fault, rng: random.Random) -> None:
    """Prefill/decode split: the KV transfer lands in the wrong decode slot (a reused transfer or bootstrap room
    id, as reported against disaggregated serving) and the decoder continues another request's prompt."""
    for i, r in enumerate(w):
        if not _ok(r) or r.prefill is None or rng.random() >= f.rate:
            continue
        near = [s for s in w[max(0, i - 12) : i + 12] if s is not r and s.prefill == r.prefill and abs(s.ts - r.ts) < 3]
        near = [s for s in near if s.tenant.tenant_id != r.tenant.tenant_id and s.turn.private and s.output]
        if near:
            _answer_for(r, rng.choice(near), rng, "pd_kv_misdelivery")


def session_history_mixup(reqs: list[Req], w: list[Req], f: Fault, rng: random.Random) -> None:
    """A chat app's history store keyed by user cohort instead of conversation (the shape of ChatGPT's 2023 titles
    leak, one tenant deep): a turn is sent with another conversation's history and the model picks it up."""
    last_intro: dict[str, Req] = {}
    for r in w:
        t = r.tenant
        other = last_intro.get(t.tenant_id)
        if t.text.kind == "chat" and r.turn.private and r.session_id:
            last_intro[t.tenant_id] = r
        if not _ok(r) or not r.turn.history or other is None or other.session_id == r.session_id:
            continue
        if rng.random() >= f.rate * 2:
            continue
        r.turn.history = [("user", other.turn.user), ("assistant", other.output or "")]
        ack = PHRASES[t.text.lang]["ack"].format(**other.turn.ctx)
        r.output = f"{ack} {r.output}"
        r.out_tokens += tokens(ack)
        _mark(r, "session_history_mixup", [(other, ack)], "cross_session")


CLASSES: dict[str, Callable[[list[Req], list[Req], Fault, random.Random], None]] = {
    "connection_desync": connection_desync,
    "response_cache_collision": response_cache_collision,
    "placeholder_stale_kv": placeholder_stale_kv,
    "stream_interleave": stream_interleave,
    "prefix_hash_collision": prefix_hash_collision,
    "pd_kv_misdelivery": pd_kv_misdelivery,
    "session_history_mixup": session_history_mixup,
}


def inject(shape: Shape, reqs: list[Req], rng: random.Random) -> None:
    for f in shape.faults:
        t0 = shape.start_ts + f.start * shape.duration_s
        t1 = shape.start_ts + f.end * shape.duration_s
        window = [r for r in reqs if t0 <= r.ts < t1 and (not f.pools or r.pool.name in f.pools)]
        CLASSES[f.leak_class](reqs, window, f, rng)
