"""blind-v3: a held-out evaluation profile of multi-tenant LLM serving traffic with labelled leaks (README.md).

`write(shape, seed, out)` writes events.jsonl (or .jsonl.gz), labels.json and world.json; the same arguments give
the same bytes."""

from __future__ import annotations

import gzip
import random
from pathlib import Path
from typing import Any

import orjson

from streams.sim.blind3.events import exchange_events, serialise, stats_events
from streams.sim.blind3.leaks import CLASSES, inject
from streams.sim.blind3.traffic import Req, build
from streams.sim.blind3.world import SHAPES, WARMUP_FRACTION, Shape, Tenant, tenants

__all__ = ["PROFILE", "SHAPES", "generate", "write"]
PROFILE = "blind-v3"


def _scenario(r: Req) -> str | None:
    # The incident's own mechanism (placeholder decode over stale pages) apart from leaks seen only in content.
    if not r.contaminated:
        return None
    return "mechanism" if r.leak_class == "placeholder_stale_kv" else "content_only"


def _row(r: Req) -> dict[str, Any]:
    srcs = sorted(r.sources, key=lambda k: (-r.sources[k], k))
    return {
        "request_id": r.rid,
        "ts": round(r.end, 3),
        "tenant_id": r.tenant.tenant_id,
        "session_id": r.session_id,
        "cache_domain": r.pool.name,
        "status_code": r.status,
        "contaminated": r.contaminated,
        "source_tenant_id": srcs[0] if srcs else None,
        "source_tenant_ids": srcs,
        "leak_kind": r.leak_kind,
        "leak_class": r.leak_class,
        "scenario": _scenario(r),
        "canary_markers": sorted(set(r.canary_markers)),
        "receiver_lang": r.tenant.lang_label,
        "source_lang": r.source_lang,
        "shortest_passage_tokens": min(r.passages) if r.passages else None,
        "leaked_tokens": sum(r.sources.values()),
        "decoys": sorted(set(r.turn.decoys)),
    }


def _world(shape: Shape, seed: int, ts: list[Tenant], warmup_end: float) -> dict[str, Any]:
    def at(frac: float) -> float:
        return round(shape.start_ts + frac * shape.duration_s, 3)

    return {
        "profile": PROFILE,
        "shape": shape.name,
        "seed": seed,
        "about": shape.about,
        "start_ts": shape.start_ts,
        "end_ts": shape.start_ts + shape.duration_s,
        "warmup_end_ts": warmup_end,
        "otel_gateway": shape.otel,
        "pools": [vars(p) for p in shape.pools],
        "tenants": [
            {
                "tenant_id": t.tenant_id,
                "lang": t.text.lang,
                "kind": t.text.kind,
                "vendor": t.text.vendor,
                "company": t.text.company,
                "pools": t.pools,
                "weight": round(t.weight, 4),
                "overlong_rate": t.overlong_rate,
                "crate": t.text.crate,
            }
            for t in ts
        ],
        "faults": [
            {"leak_class": f.leak_class, "start_ts": at(f.start), "end_ts": at(f.end), "pools": list(f.pools)}
            for f in shape.faults
        ],
    }


def generate(shape_name: str, seed: int) -> tuple[bytes, dict[str, Any], dict[str, Any]]:
    """The events (JSON Lines), the labels and the world of one run."""
    shape = SHAPES[shape_name]
    rng = random.Random(f"{PROFILE}/{shape_name}/{seed}")
    ts = tenants(shape, rng)
    reqs = build(shape, ts, rng)
    inject(shape, reqs, rng)
    erng = random.Random(f"{PROFILE}/{shape_name}/{seed}/events")
    events = exchange_events(shape, reqs, erng) + stats_events(shape, reqs, erng)
    body = serialise(shape, events)
    warmup_end = round(shape.start_ts + WARMUP_FRACTION * shape.duration_s, 3)
    rows = sorted((_row(r) for r in reqs), key=lambda x: (x["ts"], x["request_id"]))
    counts: dict[str, int] = {}
    for x in rows:
        if x["contaminated"]:
            counts[x["leak_class"]] = counts.get(x["leak_class"], 0) + 1
    labels = {
        "profile": PROFILE,
        "shape": shape_name,
        "seed": seed,
        "warmup_end_ts": warmup_end,
        "leak_classes": sorted({f.leak_class for f in shape.faults} & set(CLASSES)),
        "leak_counts": dict(sorted(counts.items())),
        "events": body.count(b"\n"),
        "responses": rows,
    }
    return body, labels, _world(shape, seed, ts, warmup_end)


def write(shape_name: str, seed: int, out: str | Path, gzip_events: bool = False) -> dict[str, Path]:
    body, labels, world = generate(shape_name, seed)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    events = out / ("events.jsonl.gz" if gzip_events else "events.jsonl")
    if gzip_events:
        # mtime 0 and no file name in the header: the same run gives the same bytes.
        events.write_bytes(gzip.compress(body, compresslevel=6, mtime=0))
    else:
        events.write_bytes(body)
    labels_path, world_path = out / "labels.json", out / "world.json"
    labels_path.write_bytes(orjson.dumps(labels, option=orjson.OPT_INDENT_2) + b"\n")
    world_path.write_bytes(orjson.dumps(world, option=orjson.OPT_INDENT_2) + b"\n")
    return {"events": events, "labels": labels_path, "world": world_path}
