"""The wire events of one run (schemas/events.py): requests and responses as the gateway logs them, canaries from
the probers, cache_stats from every pool."""

from __future__ import annotations

import random
from typing import Any

import orjson

from schemas.timefmt import format_ts
from streams.sim.blind3.traffic import Req
from streams.sim.blind3.world import Pool, Shape

Event = tuple[float, int, dict[str, Any]]


def _eid(rng: random.Random) -> str:
    h = f"{rng.getrandbits(128):032x}"
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{h[16:20]}-{h[20:]}"


def _prompt(shape: Shape, r: Req) -> str:
    t = r.turn
    user = t.user[: shape.prompt_cap]
    if shape.otel:
        msgs = ([{"role": "system", "content": t.system}] if t.system else []) + [
            {"role": role, "content": c} for role, c in t.history
        ]
        return orjson.dumps([*msgs, {"role": "user", "content": user}]).decode()
    parts = [t.system, *(c for _, c in t.history), user]
    return "\n\n".join(p for p in parts if p)[: shape.prompt_cap]


def _trace(rng: random.Random) -> str:
    return f"00-{rng.getrandbits(128):032x}-{rng.getrandbits(64):016x}-01"


def request_event(shape: Shape, r: Req, rng: random.Random) -> dict[str, Any]:
    ev: dict[str, Any] = {
        "type": "request",
        "event_id": _eid(rng),
        "ts": r.ts,
        "request_id": r.rid,
        "tenant_id": r.tenant.tenant_id,
        "model": r.pool.model,
        "prompt_tokens": r.prompt_tokens,
        "cache_domain": r.pool.name,
        "max_output_tokens": r.max_out,
        "context_window": r.pool.context_window,
        "prompt_text": _prompt(shape, r),
    }
    if r.session_id:
        ev["session_id"] = r.session_id
    if r.turn.canary:
        ev["canaries"] = [r.turn.canary]
    return ev


def response_event(shape: Shape, r: Req, rng: random.Random) -> dict[str, Any]:
    ev: dict[str, Any] = {
        "type": "response",
        "event_id": _eid(rng),
        "ts": round(r.end, 3),
        "request_id": r.rid,
        "tenant_id": r.tenant.tenant_id,
        "model": r.pool.model,
        "cache_domain": r.pool.name,
        "status_code": r.status,
        "duration_ms": r.dur_ms,
    }
    if r.session_id:
        ev["session_id"] = r.session_id
    if r.error_type:
        ev["error_type"] = r.error_type
    if r.output is None:
        return ev
    usage: dict[str, int] = {"input_tokens": r.in_tokens, "output_tokens": r.out_tokens}
    if shape.name != "levant-tiny":
        # The on-prem proxy passes the engine's usage through without prompt_tokens_details.
        usage["cached_input_tokens"] = r.cached_tokens
    text = r.output
    if shape.otel:
        text = orjson.dumps([{"role": "assistant", "content": text}]).decode()
    ev |= {"finish_reason": r.finish, "usage": usage, "ttft_ms": r.ttft_ms, "output_text": text}
    ev["response_id"] = r.response_id
    return ev


def exchange_events(shape: Shape, reqs: list[Req], rng: random.Random) -> list[Event]:
    out: list[Event] = []
    for n, r in enumerate(reqs):
        if r.turn.canary:
            at = round(r.ts - 0.25, 3)
            canary = {"type": "canary", "event_id": _eid(rng), "ts": at, "tenant_id": r.tenant.tenant_id}
            out.append((at, 3 * n, canary | {"marker": r.turn.canary}))
        req = request_event(shape, r, rng)
        if shape.otel:
            req["traceparent"] = trace = _trace(rng)
        out.append((r.ts, 3 * n + 1, req))
        resp = response_event(shape, r, rng)
        if shape.otel:
            resp["traceparent"] = trace
        out.append((resp["ts"], 3 * n + 2, resp))
    return out


def _load(shape: Shape, reqs: list[Req], pool: Pool) -> tuple[list[float], list[int], list[int]]:
    """Per tick: KV tokens held by running requests, prompt tokens looked up, and of those found cached."""
    n = int(shape.duration_s // shape.stats_every_s) + 1
    held, queried, hits = [0.0] * n, [0] * n, [0] * n
    for r in reqs:
        mine = r.prefill == pool.name if pool.role == "prefill" else r.pool.name == pool.name
        if not mine or r.status == 0:
            continue
        a = int((r.ts - shape.start_ts) // shape.stats_every_s)
        end = r.ts + (r.ttft_ms / 1000 if pool.role == "prefill" else r.dur_ms / 1000)
        b = min(n - 1, int((end - shape.start_ts) // shape.stats_every_s))
        kv = min(r.prompt_tokens, pool.context_window) + r.out_tokens
        for k in range(a, b + 1):
            held[k] += kv
        if a < n:
            queried[a] += min(r.prompt_tokens, pool.context_window)
            hits[a] += r.cached_tokens
    return held, queried, hits


def stats_events(shape: Shape, reqs: list[Req], rng: random.Random) -> list[Event]:
    out: list[Event] = []
    for j, pool in enumerate(shape.pools):
        held, queried, hits = _load(shape, reqs, pool)
        evicted = rng.randint(10**7, 10**9)
        hit_total, q_total = rng.randint(10**6, 10**8), 0
        q_total = hit_total * 3 + rng.randint(0, 10**7)
        resident = rng.uniform(0.3, 0.5)
        for k in range(len(held)):
            ts = round(shape.start_ts + k * shape.stats_every_s + j * 0.137 + rng.uniform(0, 0.05), 3)
            resident = min(0.8, max(0.15, resident + rng.uniform(-0.03, 0.03)))
            used = min(pool.capacity_tokens, int(held[k] + resident * pool.capacity_tokens))
            evicted += int(held[k] * rng.uniform(0.2, 0.6))
            hit_total += hits[k]
            q_total += queried[k]
            ev: dict[str, Any] = {"type": "cache_stats", "event_id": _eid(rng), "ts": ts, "cache_domain": pool.name,
                                  "role": pool.role, "capacity_tokens": pool.capacity_tokens, "used_tokens": used,
                                  "model": pool.model, "context_window": pool.context_window,
                                  "evicted_tokens_total": evicted, "prefix_cache_hits_total": hit_total,
                                  "prefix_cache_queries_total": q_total}  # fmt: skip
            if queried[k]:
                ev["cache_hit_rate"] = round(hits[k] / queried[k], 4)
            if pool.role != "unified":
                ev["role_source"] = "configured"
                ev["handoff_queue_reqs"] = rng.choice((0, 0, 0, 1, 2, 3))
                ev["kv_transfer_latency_ms"] = round(rng.uniform(2.5, 28.0), 2)
            out.append((ts, 10**9 + len(out), ev))
    return out


def serialise(shape: Shape, events: list[Event]) -> bytes:
    events.sort(key=lambda e: (e[0], e[1]))
    lines = []
    for ts, _, ev in events:
        if shape.otel:
            ev["ts"] = format_ts(ts)
        lines.append(orjson.dumps(ev))
    return b"\n".join(lines) + b"\n"
