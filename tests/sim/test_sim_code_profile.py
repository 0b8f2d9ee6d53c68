"""The traffic simulator: wire validity, determinism, and that its ground truth matches what it emitted."""

from __future__ import annotations

import argparse
import gzip
import itertools
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import orjson
import pytest

from schemas import parse_event_obj
from streams.sim.simulate import (
    INCIDENT_CAPACITY,
    INCIDENT_WINDOW,
    PROBES,
    Labels,
    SimConfig,
    add_arguments,
    iter_simulation,
    run,
    words_of,
    write_simulation,
)

FAULT_AT = 60.0
CONFIG = SimConfig(seed=11, duration_s=300.0, fault_at_s=FAULT_AT)
BIG = "glm53-big-1"


class Sim:
    def __init__(self, config: SimConfig) -> None:
        it, labels = iter_simulation(config)
        self.events: list[dict[str, Any]] = list(it)
        self.labels: Labels = labels
        self.requests = {e["request_id"]: e for e in self.events if e["type"] == "request"}
        self.responses = {e["request_id"]: e for e in self.events if e["type"] == "response"}
        self.rows = {r["request_id"]: r for r in labels.responses}


@pytest.fixture(scope="module")
def sim() -> Sim:
    return Sim(CONFIG)


@pytest.fixture(scope="module")
def clean_sim() -> Sim:
    return Sim(SimConfig(seed=11, duration_s=300.0, fault_at_s=None))


def _contains(haystack: list[str], needle: list[str]) -> bool:
    return f" {' '.join(needle)} " in f" {' '.join(haystack)} "


def test_every_event_validates_and_ids_are_unique(sim: Sim) -> None:
    for ev in sim.events:
        parse_event_obj(ev)
    ids = [e["event_id"] for e in sim.events]
    assert len(ids) == len(set(ids))
    assert len(sim.requests) == len(sim.responses) > 500
    assert {e["type"] for e in sim.events} == {"request", "response", "cache_stats", "canary"}


def test_events_sorted_and_response_after_request(sim: Sim) -> None:
    ts = [e["ts"] for e in sim.events]
    assert ts == sorted(ts)
    for rid, resp in sim.responses.items():
        req = sim.requests[rid]
        assert resp["ts"] == pytest.approx(req["ts"] + resp["duration_ms"] / 1000.0, abs=1e-5)
    # Concurrency: many requests are in flight at once.
    in_flight, peak = 0, 0
    for e in sim.events:
        in_flight += {"request": 1, "response": -1}.get(e["type"], 0)
        peak = max(peak, in_flight)
    assert peak >= 10


def test_same_seed_is_byte_identical_other_seed_differs(tmp_path: Path) -> None:
    cfg = SimConfig(seed=3, duration_s=40.0, fault_at_s=10.0)
    a = write_simulation(tmp_path / "a", cfg)
    b = write_simulation(tmp_path / "b", cfg)
    c = write_simulation(tmp_path / "c", SimConfig(seed=4, duration_s=40.0, fault_at_s=10.0))
    assert a["events"] == b["events"]
    for name in ("events.jsonl", "labels.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert (tmp_path / "a" / "events.jsonl").read_bytes() != (tmp_path / "c" / "events.jsonl").read_bytes()
    assert c["requests"] > 0


def test_gzip_output_is_deterministic_and_matches_plain(tmp_path: Path) -> None:
    cfg = SimConfig(seed=5, duration_s=20.0)
    write_simulation(tmp_path / "g1", cfg, gzip_events=True)
    write_simulation(tmp_path / "g2", cfg, gzip_events=True)
    write_simulation(tmp_path / "p", cfg)
    g1 = (tmp_path / "g1" / "events.jsonl.gz").read_bytes()
    assert g1 == (tmp_path / "g2" / "events.jsonl.gz").read_bytes()
    assert gzip.decompress(g1) == (tmp_path / "p" / "events.jsonl").read_bytes()


def test_one_label_row_per_response(sim: Sim) -> None:
    assert len(sim.labels.responses) == len(sim.responses) == len(sim.rows)
    for rid, row in sim.rows.items():
        resp = sim.responses[rid]
        assert row["ts"] == resp["ts"]
        assert row["status_code"] == resp["status_code"]
        assert row["tenant_id"] == resp["tenant_id"]
        assert row["session_id"] == resp["session_id"]
        assert row["cache_domain"] == resp["cache_domain"]
        assert row["overlong"] == (
            sim.requests[rid]["prompt_tokens"] > sim.labels.meta["capacity"][row["cache_domain"]]
        )
    meta = sim.labels.meta
    assert meta["fault_onset_ts"] == CONFIG.start_ts + FAULT_AT
    assert meta["fault_domains"] == ["glm53-pd-1", "glm53-pd-2"]
    assert meta["capacity"]["glm53-pd-1"] == INCIDENT_CAPACITY
    assert meta["context_window"][BIG] == INCIDENT_WINDOW
    assert meta["probes"] == list(PROBES)
    assert len(meta["tenants"]) == CONFIG.tenants
    assert meta["end_ts"] >= max(e["ts"] for e in sim.events)


def test_contaminated_responses_carry_the_incident_signature(sim: Sim) -> None:
    contaminated = [r for r in sim.labels.responses if r["contaminated"]]
    assert len(contaminated) >= 10
    onset = sim.labels.meta["fault_onset_ts"]
    for row in contaminated:
        req, resp = sim.requests[row["request_id"]], sim.responses[row["request_id"]]
        assert row["overlong"]
        assert req["ts"] >= onset
        assert row["cache_domain"] in sim.labels.meta["fault_domains"]
        assert resp["status_code"] == 200 and row["status_code"] == 200
        assert resp["usage"]["input_tokens"] == 1
        assert INCIDENT_CAPACITY < req["prompt_tokens"] <= INCIDENT_WINDOW
        assert resp["ttft_ms"] < 100
        assert row["leak_kind"] == ("cross_tenant" if row["source_tenant_id"] != row["tenant_id"] else "cross_session")
        if row["leak_kind"] == "cross_session":
            assert row["source_session_id"] != row["session_id"]
        assert row["source_request_ids"] and row["leaked_words"] >= row["shortest_passage_words"] >= 8
    # Every over-long prompt within the window on a faulty pool after onset was answered, not rejected.
    for row in sim.labels.responses:
        req = sim.requests[row["request_id"]]
        if row["overlong"] and req["ts"] >= onset and req["prompt_tokens"] <= INCIDENT_WINDOW:
            assert row["status_code"] == 200


def test_rejections_before_fault_beyond_window_and_big_pool(sim: Sim) -> None:
    onset = sim.labels.meta["fault_onset_ts"]
    before = 0
    for row in sim.labels.responses:
        req, resp = sim.requests[row["request_id"]], sim.responses[row["request_id"]]
        if row["overlong"] and req["ts"] < onset:
            before += 1
            assert resp["status_code"] in (400, 413)
            assert "usage" not in resp and "output_text" not in resp
        if req["prompt_tokens"] > INCIDENT_WINDOW:
            assert resp["status_code"] in (400, 413) and not row["contaminated"]
        if row["cache_domain"] == BIG:
            assert not row["contaminated"] and not row["overlong"]
        if not row["contaminated"]:
            assert row["leak_kind"] is None and row["source_tenant_id"] is None and row["leaked_words"] == 0
    assert before > 0
    served_huge_on_big = [
        r
        for r in sim.labels.responses
        if r["cache_domain"] == BIG
        and sim.requests[r["request_id"]]["prompt_tokens"] > INCIDENT_CAPACITY
        and r["status_code"] == 200
    ]
    assert served_huge_on_big, "the big pool serves prompts the incident pool cannot hold"


def test_clean_engine_telemetry_is_plausible(sim: Sim) -> None:
    for row in sim.labels.responses:
        resp, req = sim.responses[row["request_id"]], sim.requests[row["request_id"]]
        if resp["status_code"] != 200 or row["overlong"]:
            continue
        assert abs(resp["usage"]["input_tokens"] - req["prompt_tokens"]) <= 0.03 * req["prompt_tokens"] + 1
        rate = req["prompt_tokens"] / max(resp["ttft_ms"] / 1000.0, 1e-9)
        assert rate <= 60_000
        assert resp["duration_ms"] > resp["ttft_ms"] and resp["output_text"]
    with_domain = sum("cache_domain" in r for r in sim.requests.values())
    assert 0.3 < with_domain / len(sim.requests) < 0.7


def test_prompt_text_and_token_counts(sim: Sim) -> None:
    sizes = [r["prompt_tokens"] for r in sim.requests.values()]
    assert min(sizes) < 1_000 and max(sizes) > INCIDENT_CAPACITY
    for req in sim.requests.values():
        assert len(req["prompt_text"]) <= CONFIG.max_prompt_text_chars
        if req["prompt_tokens"] * 4 <= CONFIG.max_prompt_text_chars:
            assert req["prompt_tokens"] == pytest.approx(len(req["prompt_text"]) / 4, abs=1)
    regular = [r for r in sim.requests.values() if r["tenant_id"] not in PROBES]
    share = sum(r["prompt_tokens"] > INCIDENT_CAPACITY for r in regular) / len(regular)
    assert 0.003 < share < 0.05


def test_leaked_content_comes_from_the_source_tenant(sim: Sim) -> None:
    # Per tenant: (ts, words) of its prompts and of its answers that were not themselves leaks.
    texts: dict[str, list[tuple[float, list[str]]]] = defaultdict(list)
    for e in sim.events:
        if e["type"] == "request":
            texts[e["tenant_id"]].append((e["ts"], words_of(e["prompt_text"])))
        elif e["type"] == "response" and e.get("output_text") and not sim.rows[e["request_id"]]["contaminated"]:
            texts[e["tenant_id"]].append((e["ts"], words_of(e["output_text"])))
    leaks_by_request: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for leak in sim.labels.leaks:
        leaks_by_request[leak["request_id"]].append(leak)
    checked = foreign = 0
    for row in sim.labels.responses:
        if not row["contaminated"]:
            continue
        resp = sim.responses[row["request_id"]]
        out_words = words_of(resp["output_text"])
        leaks = leaks_by_request[row["request_id"]]
        assert sum(p["words"] for p in leaks) == row["leaked_words"]
        assert min(p["words"] for p in leaks) == row["shortest_passage_words"]
        assert list(dict.fromkeys(p["source_request_id"] for p in leaks)) == row["source_request_ids"]
        for leak in leaks:
            passage = words_of(leak["text"])
            assert len(passage) == leak["words"]
            assert _contains(out_words, passage)
            earlier = [w for ts, w in texts[leak["source_tenant_id"]] if ts < resp["ts"]]
            assert any(_contains(w, passage) for w in earlier), "leaked words were never that tenant's"
            if leak["words"] >= 50 and leak["source_tenant_id"] != row["tenant_id"]:
                # Foreign content: the victim never had this passage in its own prompts or answers.
                own = [w for ts, w in texts[row["tenant_id"]] if ts < resp["ts"]]
                assert not any(_contains(w, passage) for w in own)
                foreign += 1
            checked += 1
        dominant: dict[str, int] = defaultdict(int)
        for leak in leaks:
            dominant[leak["source_tenant_id"]] += leak["words"]
        assert dominant[row["source_tenant_id"]] == max(dominant.values())
    assert checked >= 20 and foreign >= 10


def test_decoys_are_present(sim: Sim) -> None:
    leaks = sim.labels.leaks
    classes = {leak["length_class"] for leak in leaks}
    assert {"short", "threshold", "long"} <= classes
    assert any(8 <= leak["words"] < 16 for leak in leaks)
    assert any(16 <= leak["words"] <= 24 for leak in leaks)
    assert sum(leak["words"] >= 50 for leak in leaks) > len(leaks) / 2
    lower = [leak for leak in leaks if "lower" in leak["variant"] and leak["text"] != leak["text"].upper()]
    respaced = [leak for leak in leaks if "respaced" in leak["variant"]]
    assert lower and respaced
    for leak in lower:
        assert leak["text"] == leak["text"].lower()
        assert leak["text"] in sim.responses[leak["request_id"]]["output_text"]
    for leak in respaced:
        assert re.search(r" {2}|\n", leak["text"]) or leak["words"] < 3
    # Shared system prompts: the same opening paragraph in at least three tenants' prompts.
    heads: dict[str, set[str]] = defaultdict(set)
    for req in sim.requests.values():
        if req["prompt_text"].startswith("You are"):
            heads[req["prompt_text"][:200]].add(req["tenant_id"])
    assert max(len(t) for t in heads.values()) >= 3
    # Stock phrases shared by all tenants, and a popular file quoted by several.
    phrase = "Please review the diff below carefully and run the full test suite"
    tenants_with_phrase = {r["tenant_id"] for r in sim.responses.values() if phrase in (r.get("output_text") or "")}
    assert len(tenants_with_phrase) >= 3


def test_canaries(sim: Sim) -> None:
    canaries = [e for e in sim.events if e["type"] == "canary"]
    assert canaries
    owner = {}
    for c in canaries:
        assert c["tenant_id"] in PROBES
        assert re.fullmatch(r"CTK-CANARY-[0-9a-f]{32}", c["marker"])
        owner[c["marker"]] = c["tenant_id"]
    registered_at = {c["marker"]: c["ts"] for c in canaries}
    probe_requests = [r for r in sim.requests.values() if r["tenant_id"] in PROBES]
    assert probe_requests and all(len(r["canaries"]) == 1 for r in probe_requests)
    for r in probe_requests:
        marker = r["canaries"][0]
        assert owner[marker] == r["tenant_id"] and marker in r["prompt_text"] and registered_at[marker] <= r["ts"]
    assert any(r["prompt_tokens"] > INCIDENT_CAPACITY for r in probe_requests)
    assert all("canaries" not in r for r in sim.requests.values() if r["tenant_id"] not in PROBES)
    hits = [row for row in sim.labels.responses if row["canary_markers"]]
    assert hits, "a probe's marker should surface in another tenant's output under the fault"
    for row in hits:
        assert row["contaminated"]
        out = sim.responses[row["request_id"]]["output_text"].lower()
        for marker in row["canary_markers"]:
            assert owner[marker] != row["tenant_id"]
            assert re.search(r"ctk\W+canary\W+" + marker[-32:], out)


def test_cache_stats(sim: Sim) -> None:
    stats = [e for e in sim.events if e["type"] == "cache_stats"]
    per: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for s in stats:
        per[(s["cache_domain"], s["role"])].append(s)
        assert 0 <= s["used_tokens"] <= s["capacity_tokens"]
    assert set(per) == {(d, r) for d in ("glm53-pd-1", "glm53-pd-2", BIG) for r in ("prefill", "decode")}
    for (domain, role), series in per.items():
        assert len(series) == int(CONFIG.duration_s / 5)
        gaps = {round(b["ts"] - a["ts"], 6) for a, b in itertools.pairwise(series)}
        assert gaps == {5.0}
        if role == "prefill":
            assert all(s["context_window"] == INCIDENT_WINDOW for s in series)
            assert series[-1]["capacity_tokens"] == sim.labels.meta["capacity"][domain]
        assert max(s["used_tokens"] for s in series) > 0


def test_no_fault_has_same_traffic_and_no_contamination(sim: Sim, clean_sim: Sim) -> None:
    assert not any(r["contaminated"] for r in clean_sim.labels.responses)
    assert clean_sim.labels.meta["fault_onset_ts"] is None and clean_sim.labels.meta["fault_domains"] == []
    # Same requests; only answers to over-long prompts on faulty pools differ.
    assert [r["request_id"] for r in clean_sim.requests.values()] == [r["request_id"] for r in sim.requests.values()]
    for rid, row in clean_sim.rows.items():
        if row["overlong"]:
            assert row["status_code"] in (400, 413)
        if not sim.rows[rid]["overlong"]:
            assert clean_sim.responses[rid]["status_code"] == sim.responses[rid]["status_code"]


def test_demo_sized_run_is_quick_and_leaks(tmp_path: Path) -> None:
    summary = write_simulation(tmp_path, SimConfig(duration_s=120.0, fault_at_s=30.0))
    assert summary["contaminated"] >= 3
    assert summary["seconds"] < 20
    labels = orjson.loads((tmp_path / "labels.json").read_bytes())
    assert set(labels) == {"meta", "responses"}
    assert len(labels["responses"]) == summary["responses"]


def test_cli_no_fault(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--out", str(tmp_path), "--duration", "60", "--no-fault", "--seed", "2", "--gzip"])
    assert run(args) == 0
    summary = orjson.loads(capsys.readouterr().out)
    assert summary["contaminated"] == 0 and summary["requests"] > 100
    assert (tmp_path / "events.jsonl.gz").exists()
    labels = orjson.loads((tmp_path / "labels.json").read_bytes())
    assert labels["meta"]["seed"] == 2 and not any(r["contaminated"] for r in labels["responses"])


def _comment_windows(n: int) -> set[tuple[str, ...]]:
    from streams.sim.corpus import _COMMENT, corpus

    grams: set[tuple[str, ...]] = set()
    for f in corpus().files:
        said = words_of(" ".join(m.group(1) for m in _COMMENT.finditer(f.text)))
        grams.update(tuple(said[i : i + n]) for i in range(len(said) - n + 1))
    return grams


def test_fresh_prose_never_copies_a_files_comment_or_repeats_another_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    """The model's own text shares fewer than VERBATIM consecutive words with any file a tenant could hold,
    and two answers' fresh text share no 8-word run: clean overlap between tenants is a decoy the profile
    plants, never the chain copying private code or walking the same rare path twice."""
    import collections
    import dataclasses
    import random

    from streams.sim import corpus as texts

    grams = _comment_windows(texts.VERBATIM)
    c = texts.corpus()

    def answers(cor: Any, seed: int) -> list[list[str]]:
        rng = random.Random(seed)
        return [words_of(texts.prose(rng, cor, 4)) for _ in range(1500)]

    def copies(said: list[list[str]]) -> int:
        n = texts.VERBATIM
        return sum(tuple(ws[i : i + n]) in grams for ws in said for i in range(len(ws) - n + 1))

    def repeats(said: list[list[str]]) -> int:
        seen = collections.Counter(g for ws in said for g in {tuple(ws[i : i + 8]) for i in range(len(ws) - 7)})
        return sum(1 for n in seen.values() if n > 1)

    for seed in (1, 2):
        said = answers(c, seed)
        assert copies(said) == 0 and repeats(said) == 0
    # The unguarded chain does both (rare words with one successor): the guards are what holds.
    monkeypatch.setattr(texts, "LIKELY", 1.0)
    said = answers(dataclasses.replace(c, verbatim=frozenset()), 1)
    assert copies(said) > 0 and repeats(said) > 0
