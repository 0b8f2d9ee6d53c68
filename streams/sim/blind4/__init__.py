"""blind-v4: a held-out evaluation profile of multi-tenant LLM serving traffic with labelled leaks (README.md)."""

from __future__ import annotations

import gzip
import random
from pathlib import Path
from typing import Any

import orjson

from streams.sim.blind4.leaks import CLASSES, Injector, label_fields
from streams.sim.blind4.shapes import SHAPES, TENANTS, Shape
from streams.sim.blind4.traffic import Call, Traffic, tokens_of

__all__ = ["PROFILE", "SHAPES", "generate", "write"]

PROFILE = "blind-v4"
_PROMPT_LOG_CHARS = 12000  # the gateway logs at most this much of a prompt


def _round(ts: float) -> float:
    return round(ts, 3)


class _Events:
    def __init__(self, shape: Shape, seed: int) -> None:
        self.shape = shape
        self.rng = random.Random(f"blind4-events-{shape.name}-{seed}")
        self.rows: list[tuple[float, int, dict[str, Any]]] = []

    def add(self, ts: float, event: dict[str, Any]) -> None:
        event = {"event_id": f"ev-{len(self.rows):07d}-{self.rng.getrandbits(32):08x}", "ts": _round(ts), **event}
        self.rows.append((event["ts"], len(self.rows), event))

    def call(self, c: Call, base: float) -> None:
        shape, rng = self.shape, self.rng
        trace = f"00-{rng.getrandbits(128):032x}-{rng.getrandbits(64):016x}-01" if rng.random() < 0.6 else None
        prompt = orjson.dumps(c.messages).decode()
        req: dict[str, Any] = {
            "type": "request",
            "request_id": c.rid,
            "tenant_id": c.tenant,
            "model": c.model,
            "prompt_tokens": c.prompt_tokens,
            "cache_domain": c.pool,
            "max_output_tokens": c.max_out,
            "context_window": shape.context_window,
            "prompt_text": prompt if len(prompt) <= _PROMPT_LOG_CHARS else prompt[:_PROMPT_LOG_CHARS],
        }
        if c.session:
            req["session_id"] = c.session
        if c.markers:
            req["canaries"] = list(c.markers)
        if trace:
            req["traceparent"] = trace
        self.add(base + c.ts, req)
        out = c.output_text()
        resp: dict[str, Any] = {
            "type": "response",
            "request_id": c.rid,
            "tenant_id": c.tenant,
            "model": c.model,
            "cache_domain": c.pool,
            "status_code": c.status,
        }
        if c.session:
            resp["session_id"] = c.session
        if c.status == 200 or (c.status == 499 and out):
            n_out = tokens_of(out, c.lang)
            if c.finish:
                resp["finish_reason"] = c.finish
            cached = 0
            if c.input_tokens and c.input_tokens > 1 and len(c.messages) > 1:
                cached = min(c.input_tokens, int(c.input_tokens * rng.uniform(0.2, 0.9))) // 16 * 16
            resp["usage"] = {"input_tokens": c.input_tokens, "output_tokens": n_out, "cached_input_tokens": cached}
            resp["output_text"] = out
            dur = (c.end - c.ts) * 1000
            if c.leak and not c.cached:  # the answer's length changed: so does its decode time
                dur = rng.uniform(80, 300) + n_out * rng.uniform(12, 40)
            elif c.leak and c.cached:
                dur = rng.uniform(4, 35)
            c.end = c.ts + dur / 1000
            resp["duration_ms"] = round(dur, 1)
            if c.stream and not c.cached:
                resp["ttft_ms"] = round(min(dur, rng.uniform(60, 400) + c.prompt_tokens * 0.02), 1)
            resp["response_id"] = f"chatcmpl-{rng.getrandbits(96):024x}"
        else:
            resp["error_type"] = c.error_type
            resp["duration_ms"] = round((c.end - c.ts) * 1000, 1)
        if trace:
            resp["traceparent"] = trace
        self.add(base + c.end, resp)

    def stats(self, base: float, calls: list[Call]) -> None:
        shape, rng = self.shape, self.rng
        roles = ("prefill", "decode") if shape.disaggregated else ("unified",)
        cap = {"unified": 1_900_000, "prefill": 800_000, "decode": 2_400_000}
        hits = dict.fromkeys(((p, r) for p in shape.pools for r in roles), 0)
        queries = dict.fromkeys(hits, 0)
        evicted = dict.fromkeys(hits, 0)
        by_pool: dict[str, list[Call]] = {p: [] for p in shape.pools}
        for c in calls:
            by_pool[c.pool].append(c)
        t, i = shape.stats_every_s, dict.fromkeys(shape.pools, 0)
        while t < shape.duration_s:
            for p in shape.pools:
                active = [c for c in by_pool[p][max(0, i[p] - 200) :] if c.ts <= t < c.end + 30]
                while i[p] < len(by_pool[p]) and by_pool[p][i[p]].ts <= t:
                    i[p] += 1
                load = sum(c.prompt_tokens for c in active if c.status == 200)
                for role in roles:
                    key = (p, role)
                    used = min(cap[role], int(load * (1.0 if role != "prefill" else 0.3)) + rng.randint(20000, 90000))
                    q = load // 4 + rng.randint(0, 4000)
                    queries[key] += q
                    hits[key] += int(q * rng.uniform(0.3, 0.7))
                    evicted[key] += rng.randint(0, 30000) if used > cap[role] * 0.6 else 0
                    ev: dict[str, Any] = {
                        "type": "cache_stats",
                        "cache_domain": p,
                        "role": role,
                        "capacity_tokens": cap[role],
                        "used_tokens": used,
                        "model": shape.models[0],
                        "context_window": shape.context_window,
                        "evicted_tokens_total": evicted[key],
                        "prefix_cache_hits_total": hits[key],
                        "prefix_cache_queries_total": queries[key],
                        "cache_hit_rate": round(hits[key] / queries[key], 4) if queries[key] else 0.0,
                    }
                    if shape.disaggregated:
                        ev["cache_domain"] = f"{p}-{role}" if role == "prefill" else p
                        ev["handoff_queue_reqs"] = rng.randint(0, 6)
                        ev["kv_transfer_latency_ms"] = round(rng.uniform(2, 40), 2)
                        ev["role_source"] = "configured"
                    self.add(base + t + rng.uniform(0, 0.5), ev)
            t += shape.stats_every_s

    def jsonl(self) -> bytes:
        self.rows.sort(key=lambda r: (r[0], r[1]))
        return b"".join(orjson.dumps(e) + b"\n" for _, _, e in self.rows)


def generate(shape: str, seed: int) -> tuple[bytes, dict[str, Any], dict[str, Any]]:
    """Events (JSON Lines), labels and world of one run of `shape` with `seed`: the same arguments, the same bytes."""
    sh = SHAPES[shape]
    traffic = Traffic(sh, seed)
    calls = traffic.run()
    counts = Injector(sh, seed, calls).run()
    ev = _Events(sh, seed)
    base = sh.start_ts
    for m in traffic.canaries:
        ev.add(
            base + m["ts"],
            {"type": "canary", "tenant_id": m["tenant"], "marker": m["marker"], "session_id": m["session"]},
        )
    for c in calls:
        ev.call(c, base)
    ev.stats(base, calls)
    events = ev.jsonl()
    rows = []
    for c in sorted(calls, key=lambda c: (c.end, c.rid)):
        row = {
            "request_id": c.rid,
            "ts": _round(base + c.end),
            "status_code": c.status,
            "tenant_id": c.tenant,
            "session_id": c.session,
            "cache_domain": c.pool,
            "receiver_lang": c.lang,
            "decoys": [] if c.leak else sorted(set(c.decoys)),
        }
        row.update(label_fields(c))
        rows.append(row)
    labels = {
        "profile": PROFILE,
        "shape": shape,
        "seed": seed,
        "warmup_end_ts": _round(base + sh.duration_s / 4),
        "token_unit": "words and punctuation marks (regex \\w+|[^\\w\\s]); usage counts are the engine's",
        "leak_classes": {k: {"scenario": v[0], "leak_kind": v[1], "what": v[2]} for k, v in CLASSES.items()},
        "leak_counts": {k: counts.get(k, 0) for k in sorted(sh.leaks)},
        "contaminated": sum(r["contaminated"] for r in rows),
        "responses": rows,
    }
    world = _world(sh, seed, traffic)
    return events, labels, world


def _world(sh: Shape, seed: int, traffic: Traffic) -> dict[str, Any]:
    return {
        "profile": PROFILE,
        "shape": sh.name,
        "seed": seed,
        "description": sh.description,
        "start_ts": sh.start_ts,
        "duration_s": sh.duration_s,
        "pools": list(sh.pools),
        "disaggregated": sh.disaggregated,
        "models": list(sh.models),
        "context_window": sh.context_window,
        "response_cache": sh.response_cache,
        "tenants": {
            t: {
                "lang": TENANTS[t][0],
                "kind": TENANTS[t][1],
                "pools": sorted(set(traffic.home[t])),
                "system_prompt": "platform" if traffic.system[t].startswith("You are a helpful") else "own",
            }
            for t in sh.tenants
        },
        "probe_markers": [m["marker"] for m in traffic.canaries],
    }


def write(shape: str, seed: int, out: Path, gzip_events: bool = False) -> dict[str, Path]:
    events, labels, world = generate(shape, seed)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = {
        "events": out / ("events.jsonl.gz" if gzip_events else "events.jsonl"),
        "labels": out / "labels.json",
        "world": out / "world.json",
    }
    if gzip_events:
        paths["events"].write_bytes(gzip.compress(events, compresslevel=6, mtime=0))
    else:
        paths["events"].write_bytes(events)
    paths["labels"].write_bytes(orjson.dumps(labels, option=orjson.OPT_INDENT_2))
    paths["world"].write_bytes(orjson.dumps(world, option=orjson.OPT_INDENT_2))
    return paths
