"""blind-v4 profile checks (the profile alone: no detector runs here)."""

from __future__ import annotations

import time
from pathlib import Path

import orjson
import pytest

from schemas.events import parse_event
from streams.sim import blind4
from streams.sim.evaluate import evaluate

ROW_FIELDS = {
    "request_id",
    "ts",
    "status_code",
    "contaminated",
    "source_tenant_id",
    "source_tenant_ids",
    "leak_kind",
    "canary_markers",
    "scenario",
    "receiver_lang",
    "source_lang",
    "shortest_passage_tokens",
    "decoys",
    "tenant_id",
    "session_id",
    "cache_domain",
    "leak_class",
    "leaked_tokens",
}


@pytest.fixture(scope="module")
def quick() -> tuple[bytes, dict, dict]:
    return blind4.generate("quick", 1)


def test_interface() -> None:
    assert blind4.PROFILE == "blind-v4"
    assert "quick" in blind4.SHAPES and len(blind4.SHAPES) >= 4


def test_deterministic(quick: tuple[bytes, dict, dict]) -> None:
    again = blind4.generate("quick", 1)
    assert again[0] == quick[0]
    assert orjson.dumps(again[1]) == orjson.dumps(quick[1]) and orjson.dumps(again[2]) == orjson.dumps(quick[2])
    assert blind4.generate("quick", 2)[0] != quick[0]


def test_quick_is_small_and_fast() -> None:
    t = time.perf_counter()
    events, labels, _ = blind4.generate("quick", 3)
    assert time.perf_counter() - t < 1.0
    assert len(events.splitlines()) < 1000 and labels["responses"]


def _check(events: bytes, labels: dict) -> None:
    last = 0.0
    responses = {}
    for line in events.splitlines():
        ev = parse_event(line)
        assert ev.ts >= last
        last = ev.ts
        if ev.type == "response":
            responses[ev.request_id] = ev
    rows = labels["responses"]
    assert {r["request_id"] for r in rows} == set(responses)
    for r in rows:
        assert set(r) >= ROW_FIELDS
        assert r["ts"] == pytest.approx(responses[r["request_id"]].ts, abs=1e-3)
        if r["contaminated"]:
            assert r["ts"] >= labels["warmup_end_ts"]
            assert r["source_tenant_id"] in r["source_tenant_ids"]
            assert r["leak_kind"] in ("cross_tenant", "cross_session") and r["scenario"] in (
                "mechanism",
                "content_only",
            )
            assert (r["leak_kind"] == "cross_session") == (r["source_tenant_id"] == r["tenant_id"])
            assert r["leaked_tokens"] >= r["shortest_passage_tokens"] > 0
            text = responses[r["request_id"]].output_text or ""
            assert all(m in text for m in r["canary_markers"])
    counts: dict[str, int] = {}
    for r in rows:
        if r["contaminated"]:
            counts[r["leak_class"]] = counts.get(r["leak_class"], 0) + 1
    assert counts == {k: v for k, v in labels["leak_counts"].items() if v}
    assert labels["profile"] == "blind-v4" and labels["warmup_end_ts"] > 0
    assert evaluate(labels, []).contaminated == sum(counts.values())


def test_quick_events_and_labels(quick: tuple[bytes, dict, dict]) -> None:
    _check(quick[0], quick[1])


@pytest.mark.slow
@pytest.mark.parametrize("shape", sorted(set(blind4.SHAPES) - {"quick"}))
def test_main_shapes(shape: str) -> None:
    events, labels, world = blind4.generate(shape, 1)
    _check(events, labels)
    assert 5000 <= len(events.splitlines()) <= 15000
    assert 20 <= sum(labels["leak_counts"].values()) <= 60
    assert world["shape"] == shape


def test_write(tmp_path: Path) -> None:
    paths = blind4.write("quick", 1, tmp_path, gzip_events=True)
    assert paths["events"].name == "events.jsonl.gz" and paths["labels"].exists() and paths["world"].exists()
    assert orjson.loads(paths["labels"].read_bytes())["shape"] == "quick"
