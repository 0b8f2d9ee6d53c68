"""blind-v2 (streams/sim/blind2): the profile itself, not any detector — determinism, the wire contract, the labels."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from schemas.events import parse_event
from schemas.messages import chat_text
from streams.sim.blind2 import LEAK_CLASSES, SHAPES, write
from streams.sim.blind2.world import build
from streams.sim.blind2.writer import generate
from streams.sim.evaluate import evaluate

SEEDS = (1, 2)


@pytest.fixture(scope="module", params=SEEDS)
def run(request: pytest.FixtureRequest) -> dict[str, Any]:
    world, lines, labels = generate("quick", request.param)
    events = [orjson.loads(x) for x in lines]
    return {"world": world, "lines": lines, "events": events, "labels": labels}


def _index(events: list[dict[str, Any]]) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    req = {e["request_id"]: e for e in events if e["type"] == "request"}
    resp = {e["request_id"]: e for e in events if e["type"] == "response"}
    return req, resp


def test_same_seed_same_bytes(tmp_path: Path) -> None:
    a = write("quick", 3, tmp_path / "a", gzip_events=True)
    b = write("quick", 3, tmp_path / "b", gzip_events=True)
    for key in ("events", "labels", "world"):
        assert a[key].read_bytes() == b[key].read_bytes(), key
    c = write("quick", 4, tmp_path / "c")
    assert c["labels"].read_bytes() != a["labels"].read_bytes()


def test_every_event_passes_the_contract(run: dict[str, Any]) -> None:
    kinds: dict[str, int] = {}
    for line in run["lines"]:
        ev = parse_event(line)
        kinds[ev.type] = kinds.get(ev.type, 0) + 1
    assert kinds["request"] == kinds["response"] == len(run["labels"]["responses"])
    assert kinds["cache_stats"] > 0
    ts = [parse_event(x).ts for x in run["lines"]]
    assert ts == sorted(ts)
    assert max(ts) < 1796515200  # 2026-12-06T00:00:00Z: every event is in the past


def test_labels_hold_every_field_evaluate_reads(run: dict[str, Any]) -> None:
    labels = run["labels"]
    _, resp = _index(run["events"])
    for r in labels["responses"]:
        assert resp[r["request_id"]]["status_code"] == r["status_code"]
        assert abs(r["ts"] - parse_event(orjson.dumps(resp[r["request_id"]])).ts) < 0.002
        assert r["receiver_lang"]
        if r["contaminated"]:
            assert r["scenario"] in ("mechanism", "content_only")
            assert r["source_tenant_id"] == r["source_tenant_ids"][0]
            assert r["source_lang"] and r["shortest_passage_tokens"] > 0 and r["source_request_ids"]
            assert 200 <= r["status_code"] <= 299
    ev = evaluate(labels, [])
    assert ev.contaminated == sum(r["contaminated"] for r in labels["responses"]) > 0


def test_every_leak_class_after_the_warmup(run: dict[str, Any]) -> None:
    labels = run["labels"]
    req, _ = _index(run["events"])
    warm = labels["warmup_end_ts"]
    seen = set()
    for r in labels["responses"]:
        if r["contaminated"]:
            seen.add(r["leak_kind"])
            assert parse_event(orjson.dumps(req[r["request_id"]])).ts >= warm
            assert r["source_tenant_id"]
    assert seen == set(LEAK_CLASSES)


def test_leaked_text_is_the_sources_and_in_the_receivers_output(run: dict[str, Any]) -> None:
    req, resp = _index(run["events"])
    rows = {r["request_id"]: r for r in run["labels"]["responses"]}
    for r in rows.values():
        if not r["contaminated"]:
            continue
        out = resp[r["request_id"]]["output_text"]
        tokens: dict[str, int] = {}
        for p in r["passages"]:
            assert p["text"] and p["text"] in out
            src = p["source_request_id"]
            assert req[src]["tenant_id"] == p["source_tenant_id"]
            tokens[p["source_tenant_id"]] = tokens.get(p["source_tenant_id"], 0) + p["tokens"]
            if p["field"] == "prompt":
                assert p["text"] in chat_text(req[src]["prompt_text"])
            elif p["field"] == "output":
                assert p["text"] in resp[src]["output_text"]
            else:  # the answer generated for the source, delivered to this receiver instead (a swap)
                assert p["field"] == "generated" and r["leak_kind"] == "swap"
        assert r["source_tenant_id"] == max(tokens, key=lambda k: (tokens[k], k == r["source_tenant_id"]))
        if r["leak_kind"] == "cross_session":
            assert r["source_tenant_id"] == r["tenant_id"]
            assert all(req[s].get("session_id") not in (None, r["session_id"]) for s in r["source_request_ids"])
        else:
            assert r["tenant_id"] not in r["source_tenant_ids"]


def test_swapped_receivers_each_got_the_others_text(run: dict[str, Any]) -> None:
    _, resp = _index(run["events"])
    rows = {r["request_id"]: r for r in run["labels"]["responses"]}
    swaps = [r for r in rows.values() if r["leak_kind"] == "swap"]
    assert swaps
    for r in swaps:
        other = rows[r["swapped_with"]]
        assert other["swapped_with"] == r["request_id"] and other["leak_kind"] == "swap"
        assert r["source_request_ids"] == [other["request_id"]] and r["source_tenant_id"] == other["tenant_id"]
        assert resp[r["request_id"]]["output_text"] == r["passages"][0]["text"]
        assert resp[r["request_id"]]["output_text"] != resp[other["request_id"]]["output_text"]


def test_stale_kv_comes_on_an_overlong_2xx_with_one_input_token(run: dict[str, Any]) -> None:
    req, resp = _index(run["events"])
    rows = [r for r in run["labels"]["responses"] if r["leak_kind"] == "stale_kv"]
    assert rows
    for r in rows:
        q, a = req[r["request_id"]], resp[r["request_id"]]
        assert q["prompt_tokens"] > q["context_window"]
        assert 200 <= a["status_code"] <= 299 and a["usage"]["input_tokens"] <= 2
        assert r["scenario"] == "mechanism"
        assert all(req[s]["cache_domain"] == q["cache_domain"] for s in r["source_request_ids"])
    for r in run["labels"]["responses"]:
        if r["overlong"] and not r["contaminated"]:
            assert r["status_code"] >= 400  # outside the fault an over-long prompt is refused


def test_some_leaked_answers_come_back_in_the_next_turn() -> None:
    found = 0
    for seed in SEEDS:
        _, lines, labels = generate("quick", seed)
        events = [orjson.loads(x) for x in lines]
        req, resp = _index(events)
        later: dict[str, list[dict[str, Any]]] = {}
        for e in events:
            if e["type"] == "request" and e.get("session_id"):
                later.setdefault(e["session_id"], []).append(e)
        for r in labels["responses"]:
            if r["contaminated"] and r["session_id"]:
                out = resp[r["request_id"]]["output_text"]
                t = req[r["request_id"]]["ts"]
                found += any(e["ts"] > t and out in chat_text(e["prompt_text"]) for e in later[r["session_id"]])
    assert found


def test_every_shape_places_every_class_after_the_warmup() -> None:
    for name, shape in SHAPES.items():
        world = build(name, 11)
        kinds = {f.kind for f in world.faults}
        assert kinds == set(LEAK_CLASSES), name
        assert all(world.warmup_end < f.start < f.end <= world.t0 + world.duration_s for f in world.faults)
        assert len({t.lang for t in world.tenants}) >= 2 or name == "quick"
        assert world.t0 + shape["duration_s"] < 1796515200


@pytest.mark.slow
@pytest.mark.parametrize("shape", [s for s in SHAPES if s != "quick"])
def test_full_shapes_hold_every_class(shape: str) -> None:
    _, lines, labels = generate(shape, 1)
    assert 3000 <= len(lines) <= 15000
    assert {r["leak_kind"] for r in labels["responses"] if r["contaminated"]} == set(LEAK_CLASSES)
