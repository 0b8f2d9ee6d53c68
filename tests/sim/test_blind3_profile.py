"""The blind-v3 profile itself (streams/sim/blind3): determinism, the wire contract, the labels' format and
consistency. Checks of the profile only: nothing here runs a detector."""

from __future__ import annotations

import gzip
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from schemas.events import Response, parse_event
from streams.sim.blind3 import SHAPES, generate, write
from streams.sim.evaluate import evaluate

# Every field of a label row that streams/sim/evaluate.py reads.
ROW_FIELDS = {
    "request_id", "ts", "status_code", "contaminated", "source_tenant_id", "source_tenant_ids", "leak_kind",
    "canary_markers", "scenario", "receiver_lang", "source_lang", "shortest_passage_tokens", "decoys",
}  # fmt: skip
TOP_FIELDS = {"profile", "shape", "seed", "warmup_end_ts", "leak_classes", "responses"}
MAIN = [s for s in SHAPES if s != "quick"]


@pytest.fixture(scope="module")
def runs() -> dict[str, tuple[bytes, dict[str, Any], dict[str, Any]]]:
    return {name: generate(name, 1) for name in SHAPES}


def test_same_arguments_give_the_same_bytes(tmp_path: Path) -> None:
    a = write("quick", 7, tmp_path / "a", gzip_events=True)
    b = write("quick", 7, tmp_path / "b", gzip_events=True)
    for key in ("events", "labels", "world"):
        assert a[key].read_bytes() == b[key].read_bytes()
    plain = write("quick", 7, tmp_path / "c")
    assert gzip.decompress(a["events"].read_bytes()) == plain["events"].read_bytes()
    assert write("quick", 8, tmp_path / "d")["events"].read_bytes() != plain["events"].read_bytes()


@pytest.mark.parametrize("name", list(SHAPES))
def test_every_event_is_on_the_wire_contract_and_in_time_order(runs: dict, name: str) -> None:
    body = runs[name][0]
    last = 0.0
    for line in body.splitlines():
        ev = parse_event(line)
        assert ev.ts >= last
        last = ev.ts


@pytest.mark.parametrize("name", list(SHAPES))
def test_labels_have_every_field_evaluate_reads(runs: dict, name: str) -> None:
    labels = runs[name][1]
    assert set(labels) >= TOP_FIELDS
    assert labels["profile"] == "blind-v3" and labels["shape"] == name and labels["seed"] == 1
    for row in labels["responses"]:
        assert set(row) >= ROW_FIELDS
    ev = evaluate(labels, [])
    assert ev.contaminated == sum(r["contaminated"] for r in labels["responses"])


@pytest.mark.parametrize("name", list(SHAPES))
def test_labels_match_the_responses(runs: dict, name: str) -> None:
    body, labels, world = runs[name]
    responses = {}
    for line in body.splitlines():
        ev = parse_event(line)
        if isinstance(ev, Response):
            responses[ev.request_id] = ev
    rows = {r["request_id"]: r for r in labels["responses"]}
    assert rows.keys() == responses.keys()
    tenants = {t["tenant_id"] for t in world["tenants"]}
    for rid, row in rows.items():
        ev = responses[rid]
        assert row["status_code"] == ev.status_code and row["tenant_id"] == ev.tenant_id
        assert abs(row["ts"] - ev.ts) < 0.002
        if not row["contaminated"]:
            assert row["source_tenant_id"] is None
            continue
        assert 200 <= ev.status_code <= 299 and ev.output_text
        assert row["source_tenant_id"] in tenants and row["source_tenant_id"] == row["source_tenant_ids"][0]
        assert row["shortest_passage_tokens"] >= 1 and row["leak_class"] in labels["leak_classes"]
        if row["leak_kind"] == "cross_session":
            assert row["source_tenant_id"] == ev.tenant_id
        else:
            assert row["leak_kind"] == "cross_tenant" and ev.tenant_id not in row["source_tenant_ids"]
        for marker in row["canary_markers"]:
            assert marker in ev.output_text


@pytest.mark.parametrize("name", list(SHAPES))
def test_leaks_only_after_warmup_and_inside_their_fault_windows(runs: dict, name: str) -> None:
    _, labels, world = runs[name]
    assert labels["warmup_end_ts"] == world["warmup_end_ts"]
    assert world["start_ts"] < labels["warmup_end_ts"] < world["end_ts"]
    windows = {f["leak_class"]: [] for f in world["faults"]}
    for f in world["faults"]:
        windows[f["leak_class"]].append((f["start_ts"], f["end_ts"]))
    leaked = [r for r in labels["responses"] if r["contaminated"]]
    assert leaked
    for r in leaked:
        assert r["ts"] >= labels["warmup_end_ts"]
        # A response ends after its request started inside the window; a long one may end after the window closes.
        assert any(a <= r["ts"] <= b + 600 for a, b in windows[r["leak_class"]])


@pytest.mark.parametrize("name", MAIN)
def test_main_shapes_are_of_the_promised_size(runs: dict, name: str) -> None:
    n = runs[name][0].count(b"\n")
    assert 5_000 <= n <= 15_000
    assert {"cross_tenant"} <= {r["leak_kind"] for r in runs[name][1]["responses"] if r["contaminated"]}


def test_quick_shape_is_small_and_fast() -> None:
    t0 = time.perf_counter()
    body, labels, _ = generate("quick", 3)
    assert time.perf_counter() - t0 < 2.0
    assert body.count(b"\n") < 1_000
    assert any(r["contaminated"] for r in labels["responses"])


def test_world_names_every_tenant_and_pool(runs: dict) -> None:
    for body, _, world in runs.values():
        tenants = {t["tenant_id"] for t in world["tenants"]}
        pools = {p["name"] for p in world["pools"]}
        for line in body.splitlines():
            ev = orjson.loads(line)
            assert ev.get("tenant_id", next(iter(tenants))) in tenants
            assert ev.get("cache_domain", next(iter(pools))) in pools
