"""A run written out: events.jsonl (the wire contract), labels.json (ground truth), world.json (the deployment)."""

from __future__ import annotations

import gzip
import io
import random
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from streams.sim.blind2 import corpus
from streams.sim.blind2.leaks import Injector
from streams.sim.blind2.traffic import Exchange, Simulation
from streams.sim.blind2.world import World, build


def rfc3339(ts: float) -> str:
    dt = datetime.fromtimestamp(round(ts, 3), tz=UTC)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


def _request(ex: Exchange, eid: str) -> dict[str, Any]:
    ev: dict[str, Any] = {
        "type": "request",
        "event_id": eid,
        "ts": rfc3339(ex.start),
        "traceparent": ex.trace,
        "request_id": ex.rid,
        "tenant_id": ex.tenant.id,
        "model": ex.model,
        "prompt_tokens": ex.prompt_tokens,
        "cache_domain": ex.domain,
        "context_window": ex.window,
        "prompt_text": ex.prompt_wire,
    }
    if ex.session.sid is not None:
        ev["session_id"] = ex.session.sid
    if ex.tenant.max_output_tokens is not None:
        ev["max_output_tokens"] = ex.tenant.max_output_tokens
    return ev


def _response(ex: Exchange, eid: str) -> dict[str, Any]:
    ev: dict[str, Any] = {
        "type": "response",
        "event_id": eid,
        "ts": rfc3339(ex.end),
        "traceparent": ex.trace,
        "request_id": ex.rid,
        "tenant_id": ex.tenant.id,
        "model": ex.model,
        "cache_domain": ex.domain,
        "status_code": ex.status,
        "ttft_ms": ex.ttft_ms,
        "duration_ms": ex.duration_ms,
    }
    if ex.session.sid is not None:
        ev["session_id"] = ex.session.sid
    if ex.ok:
        ev["finish_reason"] = ex.finish
        ev["usage"] = {"input_tokens": ex.usage_in, "output_tokens": ex.usage_out, "cached_input_tokens": ex.cached}
        ev["output_text"] = ex.out
        ev["response_id"] = ex.response_id
    else:
        ev["error_type"] = ex.error
    return ev


def _cache_stats(world: World, exchanges: list[Exchange], rng: random.Random) -> list[tuple[float, dict[str, Any]]]:
    """What a metrics scraper reports for each pool every few seconds: occupancy, evictions, prefix-cache counters."""
    out: list[tuple[float, dict[str, Any]]] = []
    step = world.cache_stats_s
    by_pool: dict[str, list[Exchange]] = {}
    for ex in exchanges:
        by_pool.setdefault(ex.domain, []).append(ex)
    for name, pool in world.pools.items():
        mine = [e for e in by_pool.get(name, []) if e.ok]
        hits = queries = evicted = 0
        done = 0
        t = world.t0 + rng.uniform(0, step)
        while t < world.t0 + world.duration_s:
            window = [e for e in mine if e.start <= t and e.end > t - 180]
            live = sum(e.prompt_tokens + e.usage_out for e in window if e.end > t)
            resident = sum(e.prompt_tokens + e.usage_out for e in window if e.end <= t)
            used = min(pool.capacity_tokens, live + resident)
            while done < len(mine) and mine[done].start <= t:
                e = mine[done]
                queries += e.usage_in
                hits += e.cached
                done += 1
            evicted += max(0, live + resident - pool.capacity_tokens) + sum(
                e.prompt_tokens for e in mine if t - step - 180 < e.end <= t - 180
            )
            recent = [e for e in window if e.start > t - 60]
            q = sum(e.usage_in for e in recent)
            out.append(
                (
                    round(t, 3),
                    {
                        "type": "cache_stats",
                        "event_id": f"cs-{name}-{len(out):06d}",
                        "ts": round(t, 3),
                        "cache_domain": name,
                        "role": "unified",
                        "role_source": "derived",
                        "capacity_tokens": pool.capacity_tokens,
                        "used_tokens": used,
                        "model": pool.model,
                        "context_window": pool.context_window,
                        "evicted_tokens_total": evicted,
                        "prefix_cache_hits_total": hits,
                        "prefix_cache_queries_total": queries,
                        "cache_hit_rate": round(sum(e.cached for e in recent) / q, 4) if q else 0.0,
                    },
                )
            )
            t += step
    return out


def _label(ex: Exchange) -> dict[str, Any]:
    leak = ex.receiver_of or {}
    return {
        "request_id": ex.rid,
        "ts": round(ex.end, 3),
        "status_code": ex.status,
        "tenant_id": ex.tenant.id,
        "session_id": ex.session.sid,
        "cache_domain": ex.domain,
        "app": ex.tenant.app,
        "receiver_lang": ex.turn.out_lang if ex.tenant.lang != "code" else "code",
        "overlong": ex.overlong,
        "contaminated": bool(leak),
        "scenario": leak.get("scenario"),
        "leak_kind": leak.get("leak_kind"),
        "fault_id": leak.get("fault_id"),
        "source_tenant_id": leak.get("source_tenant_id"),
        "source_tenant_ids": leak.get("source_tenant_ids", []),
        "source_request_ids": leak.get("source_request_ids", []),
        "source_lang": leak.get("source_lang"),
        "shortest_passage_tokens": leak.get("shortest_passage_tokens"),
        "leaked_tokens": leak.get("leaked_tokens", 0),
        "swapped_with": leak.get("swapped_with"),
        "interleaved_with": leak.get("interleaved_with"),
        "passages": leak.get("passages", []),
        "canary_markers": [],
        "decoys": sorted(ex.decoys),
    }


def generate(shape: str, seed: int) -> tuple[World, list[bytes], dict[str, Any]]:
    world = build(shape, seed)
    sim = Simulation(world, Injector(world))
    exchanges = sim.run()
    rng = random.Random(f"blind-v2/{shape}/{seed}/events")
    timed: list[tuple[float, int, dict[str, Any]]] = []
    for i, ex in enumerate(exchanges):
        timed.append((ex.start, 2 * i, _request(ex, f"evt-{rng.getrandbits(64):016x}")))
        timed.append((ex.end, 2 * i + 1, _response(ex, f"evt-{rng.getrandbits(64):016x}")))
    for ts, ev in _cache_stats(world, exchanges, rng):
        timed.append((ts, 10**9 + len(timed), ev))
    timed.sort(key=lambda x: (round(x[0], 3), x[1]))
    lines = [orjson.dumps(ev) for _, _, ev in timed]
    rows = sorted((_label(ex) for ex in exchanges), key=lambda r: (r["ts"], r["request_id"]))
    labels = {
        "profile": "blind-v2",
        "shape": shape,
        "seed": seed,
        "warmup_end_ts": round(world.warmup_end, 3),
        "leak_classes": sorted({r["leak_kind"] for r in rows if r["contaminated"]}),
        "responses": rows,
    }
    return world, lines, labels


def write(shape_name: str, seed: int, out: Path, gzip_events: bool = False) -> dict[str, Path]:
    world, lines, labels = generate(shape_name, seed)
    out.mkdir(parents=True, exist_ok=True)
    body = b"\n".join(lines) + b"\n"
    if gzip_events:
        events = out / "events.jsonl.gz"
        buf = io.BytesIO()
        with gzip.GzipFile(filename="events.jsonl", mode="wb", fileobj=buf, mtime=0) as gz:
            gz.write(body)
        events.write_bytes(buf.getvalue())
    else:
        events = out / "events.jsonl"
        events.write_bytes(body)
    paths = {"events": events, "labels": out / "labels.json", "world": out / "world.json"}
    paths["labels"].write_bytes(orjson.dumps(labels, option=orjson.OPT_INDENT_2) + b"\n")
    paths["world"].write_bytes(orjson.dumps(world.as_json(), option=orjson.OPT_INDENT_2) + b"\n")
    return paths


__all__ = ["corpus", "generate", "write"]
