"""The multilingual profile: every scenario's labels match its text, decoys are public over time, determinism."""

from __future__ import annotations

import itertools
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import orjson
import pytest

from schemas import parse_event_obj
from streams.sim import lexicon
from streams.sim.simulate import SimConfig, iter_simulation, public_corpus, write_public_corpus, write_simulation
from streams.sim.tokens import approx_tokens, cjk_share, unit_spans

FAULT_AT = 300.0
# 20 simulated minutes at a low rate: long enough for decoys to come back after a 15-minute window.
CONFIG = SimConfig(profile="multilingual", seed=11, duration_s=1200.0, rate=1.5, fault_at_s=FAULT_AT)
PC = "glm53-pc-1"


class Sim:
    def __init__(self, config: SimConfig) -> None:
        it, labels = iter_simulation(config)
        self.events: list[dict[str, Any]] = list(it)
        self.labels = labels
        self.requests = {e["request_id"]: e for e in self.events if e["type"] == "request"}
        self.responses = {e["request_id"]: e for e in self.events if e["type"] == "response"}
        self.rows = {r["request_id"]: r for r in labels.responses}
        self.leaks: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for leak in labels.leaks:
            self.leaks[leak["request_id"]].append(leak)

    def texts_before(self, tenant: str, ts: float) -> list[str]:
        """A tenant's prompts and answers up to ts."""
        out = [r["prompt_text"] for r in self.requests.values() if r["tenant_id"] == tenant and r["ts"] < ts]
        out += [
            r["output_text"]
            for r in self.responses.values()
            if r["tenant_id"] == tenant and r["ts"] < ts and r.get("output_text")
        ]
        return out


@pytest.fixture(scope="module")
def sim() -> Sim:
    return Sim(CONFIG)


def _rows(sim: Sim, scenario: str) -> list[dict[str, Any]]:
    return [r for r in sim.labels.responses if r["scenario"] == scenario]


def test_events_validate_sorted_and_unique(sim: Sim) -> None:
    for ev in sim.events:
        parse_event_obj(ev)
    assert len({e["event_id"] for e in sim.events}) == len(sim.events)
    assert [e["ts"] for e in sim.events] == sorted(e["ts"] for e in sim.events)
    assert len(sim.rows) == len(sim.responses) > 1000
    assert sim.labels.meta["profile"] == "multilingual"
    assert sim.labels.meta["content_only_domains"] == [PC]


def test_tenants_write_their_language(sim: Sim) -> None:
    langs = sim.labels.meta["tenant_langs"]
    assert {"zh", "ja", "de", "en", "code"} <= set(langs.values())
    by_lang: dict[str, list[str]] = defaultdict(list)
    for rid, row in sim.rows.items():
        out = sim.responses[rid].get("output_text")
        if out and not row["contaminated"]:
            by_lang[row["receiver_lang"]].append(out)
    for lang in ("zh", "ja"):
        assert sum(cjk_share(t) > 0.5 for t in by_lang[lang]) / len(by_lang[lang]) > 0.9
    assert any(re.search("[\u3040-\u309f]", t) for t in by_lang["ja"])  # hiragana: Japanese, not Chinese
    assert sum(not re.search("[\u3040-\u309f]", t) for t in by_lang["zh"]) / len(by_lang["zh"]) > 0.9
    for lang in ("de", "en", "code"):
        assert sum(cjk_share(t) < 0.05 for t in by_lang[lang]) / len(by_lang[lang]) > 0.9
    assert any(re.search("[äöüß]", t) for t in by_lang["de"])
    # Realistic chat lengths: short questions and answers, and long documents.
    sizes = sorted(r["prompt_tokens"] for r in sim.requests.values())
    assert sizes[len(sizes) // 20] < 300 and 500 < sizes[len(sizes) // 2] < 10_000
    outs = sorted(r["usage"]["output_tokens"] for r in sim.responses.values() if "usage" in r)
    assert outs[len(outs) // 10] < 120 and outs[-len(outs) // 10] > 400


def test_content_only_leaks_match_their_text(sim: Sim) -> None:
    rows = _rows(sim, "content_only")
    assert len(rows) >= 15
    capacity = sim.labels.meta["capacity"][PC]
    onset = sim.labels.meta["fault_onset_ts"]
    for row in rows:
        rid = row["request_id"]
        req, resp = sim.requests[rid], sim.responses[rid]
        # No mechanism symptom: within capacity, accounting right, plausible time to first token.
        assert row["cache_domain"] == PC and req["ts"] >= onset and not row["overlong"]
        assert req["prompt_tokens"] <= capacity and resp["status_code"] == 200
        assert abs(resp["usage"]["input_tokens"] - req["prompt_tokens"]) <= 0.03 * req["prompt_tokens"] + 1
        assert resp["ttft_ms"] >= 20.0 + req["prompt_tokens"] / 60_000 * 1000 - 1e-6
        leaks = sim.leaks[rid]
        assert 1 <= len(leaks) <= 3 and row["leak_kind"] == "cross_tenant"
        out = resp["output_text"]
        assert row["leaked_tokens"] == sum(p["tokens"] for p in leaks)
        for leak in leaks:
            assert leak["scenario"] == "content_only" and leak["source_tenant_id"] != row["tenant_id"]
            assert 16 <= leak["tokens"] <= 64 + 2
            assert leak["tokens"] == approx_tokens(leak["text"])
            assert leak["text"] in out and not out.startswith(leak["text"])  # between the model's own text
            assert leak["source_lang"] == sim.labels.meta["tenant_langs"][leak["source_tenant_id"]]
            assert any(leak["text"] in t for t in sim.texts_before(leak["source_tenant_id"], resp["ts"]))
            assert not any(leak["text"] in t for t in sim.texts_before(row["tenant_id"], req["ts"]))
        assert row["source_lang"] == sim.labels.meta["tenant_langs"][row["source_tenant_id"]]
    # Cut at arbitrary token boundaries: CJK fragments mostly end mid-clause, not at 。
    cjk = [p for r in rows for p in sim.leaks[r["request_id"]] if p["source_lang"] in ("zh", "ja")]
    assert cjk and sum(not p["text"].endswith(("。", "？", "！")) for p in cjk) > len(cjk) / 2
    assert {p["source_lang"] for r in rows for p in sim.leaks[r["request_id"]]} >= {"zh", "en"}


def test_mechanism_leaks_carry_the_incident_signature(sim: Sim) -> None:
    rows = _rows(sim, "mechanism")
    assert len(rows) >= 5
    for row in rows:
        resp = sim.responses[row["request_id"]]
        assert row["overlong"] and row["cache_domain"] in sim.labels.meta["fault_domains"]
        assert resp["usage"]["input_tokens"] == 1 and resp["ttft_ms"] < 100
        for leak in sim.leaks[row["request_id"]]:
            assert leak["text"] in resp["output_text"]
            assert any(leak["text"] in t for t in sim.texts_before(leak["source_tenant_id"], resp["ts"]))


def test_sessions_resend_their_history_and_stay_clean(sim: Sim) -> None:
    by_session: dict[str, list[str]] = defaultdict(list)
    for rid in sorted(sim.requests, key=lambda r: sim.requests[r]["ts"]):
        by_session[sim.requests[rid]["session_id"]].append(rid)
    resent = 0
    for rids in by_session.values():
        for prev, cur in itertools.pairwise(rids):
            row = sim.rows[cur]
            out = sim.responses[prev].get("output_text")
            if "session_resend" in row["decoys"] and out and sim.rows[prev]["scenario"] != "mechanism":
                assert sim.requests[cur]["tenant_id"] == sim.requests[prev]["tenant_id"]
                if out in sim.requests[cur]["prompt_text"]:
                    resent += 1
                assert row["scenario"] != "mechanism" or row["overlong"]
                assert not row["contaminated"] or row["scenario"] in ("content_only", "mechanism")
    assert resent > 100
    # A content-only leak's answer is re-sent in the victim's next turn (the client cannot tell).
    victims = [r for r in _rows(sim, "content_only") if len(by_session[r["session_id"]]) > 1]
    assert any(
        sim.responses[r["request_id"]]["output_text"] in sim.requests[nxt]["prompt_text"]
        for r in victims
        for nxt in by_session[r["session_id"]][by_session[r["session_id"]].index(r["request_id"]) + 1 :][:1]
    )


def test_a_clean_answer_recalls_only_the_history_its_prompt_resent() -> None:
    # A model cannot quote what its context did not hold: a recall of an earlier turn that the prompt had trimmed
    # away is text from outside the context, which is what a leak is (before, the simulator quoted the session's
    # whole history and labelled it clean). Long sessions at a small prompt budget make trimming common.
    sim = Sim(SimConfig(profile="multilingual", seed=5, duration_s=900.0, rate=2.0, max_prompt_text_chars=3_000))
    recalls = 0
    for rid, resp in sim.responses.items():
        out, row = resp.get("output_text") or "", sim.rows[rid]
        if row["contaminated"]:
            continue
        for lang, lead in lexicon.RECALL.items():
            at = out.find(lead + "\n")
            if at < 0:
                continue
            quote = out[at + len(lead) + 1 :][:16]  # an excerpt has 20 units or more
            assert quote and quote in sim.requests[rid]["prompt_text"], (lang, rid)
            recalls += 1
    assert recalls > 20


def _prompt_users(sim: Sim, text: str) -> list[tuple[float, str]]:
    return sorted((r["ts"], r["tenant_id"]) for r in sim.requests.values() if text in r["prompt_text"])


def test_decoys_are_public_over_time_and_labelled_clean(sim: Sim) -> None:
    kinds = {k for r in sim.labels.responses for k in r["decoys"]}
    assert {"public_doc", "public_echo", "translation", "rag", "boilerplate", "vendored", "session_resend"} <= kinds
    docs = public_corpus(CONFIG)
    many_over_time = rare_in_window = 0
    for doc in docs:
        users = _prompt_users(sim, doc) if len(doc) > 40 else []
        tenants = {t for _, t in users}
        if len(tenants) >= 3:
            many_over_time += 1
            # When one of its users sent it, did the trailing 15-minute window (the index's) show at most two
            # tenants? That is the moment a monitor must tell public text from a leak by more than the window.
            # (Counted only once the doc already had >= 3 tenants: public over time, rare in the window.)
            rare_in_window += any(
                len({t for ts2, t in users if ts2 <= ts}) >= 3
                and len({t for ts2, t in users if ts - 900 <= ts2 <= ts}) <= 2
                for ts, _ in users
            )
    assert many_over_time >= 10 and rare_in_window >= 1
    for kind in ("public_doc", "translation", "rag", "public_echo"):
        assert all(not r["contaminated"] or r["scenario"] != "decoy" for r in sim.labels.responses)
        assert any(r["scenario"] == "decoy" and kind in r["decoys"] for r in sim.labels.responses)
    # Echoed unprompted: a public text in the answer that is not in its own prompt.
    echoes = [r for r in sim.labels.responses if "public_echo" in r["decoys"] and not r["contaminated"]]
    assert any(
        d in sim.responses[r["request_id"]]["output_text"] and d not in sim.requests[r["request_id"]]["prompt_text"]
        for r in echoes
        for d in docs
        if len(d) > 40
    )


def test_private_text_is_private() -> None:
    """Unrelated generated texts never share a 16-token run: every clean overlap is a deliberate decoy."""
    import random

    seen: dict[tuple[str, ...], int] = {}
    for i in range(160):
        lang = ("zh", "ja", "de", "en")[i % 4]
        rng = random.Random(f"private:{i}")
        doc = lexicon.document(rng, lang, 400, lexicon.entities(lang, f"t{i % 8}"))
        units = [doc[s:e].lower() for s, e, _ in unit_spans(doc)]
        for j in range(len(units) - 15):
            g = tuple(units[j : j + 16])
            assert seen.setdefault(g, i) == i, f"docs {seen[g]} and {i} share {''.join(g)!r}"


def test_public_corpus_file_holds_every_decoy_source(sim: Sim, tmp_path: Path) -> None:
    path = tmp_path / "public.txt"
    n = write_public_corpus(path, CONFIG)
    text = path.read_text(encoding="utf-8")
    docs = public_corpus(CONFIG)
    assert n == len(docs) > 50
    assert all(d in text for d in docs)
    assert "Permission is hereby granted" in text and "祇園精舎" in text and "学而时习之" in text


@pytest.mark.slow  # three more simulations
def test_same_seed_is_byte_identical_other_seed_differs(tmp_path: Path) -> None:
    cfg = SimConfig(profile="multilingual", seed=3, duration_s=60.0)
    write_simulation(tmp_path / "a", cfg)
    write_simulation(tmp_path / "b", cfg)
    write_simulation(tmp_path / "c", SimConfig(profile="multilingual", seed=4, duration_s=60.0))
    for name in ("events.jsonl", "labels.json", "leaks.jsonl"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert (tmp_path / "a" / "events.jsonl").read_bytes() != (tmp_path / "c" / "events.jsonl").read_bytes()
    labels = orjson.loads((tmp_path / "a" / "labels.json").read_bytes())
    assert labels["meta"]["fault_onset_ts"] == cfg.start_ts + 30.0  # half the duration by default


def test_canaries_come_from_probe_tenants_with_strong_markers(sim: Sim) -> None:
    canaries = [e for e in sim.events if e["type"] == "canary"]
    assert canaries
    for c in canaries:
        assert c["tenant_id"].startswith("probe-") and re.fullmatch(r"CTK-CANARY-[0-9a-f]{32}", c["marker"])
    hits = [r for r in sim.labels.responses if r["canary_markers"]]
    assert hits and all(r["contaminated"] for r in hits)


def test_no_fault_same_requests_no_contamination(sim: Sim) -> None:
    clean = Sim(SimConfig(profile="multilingual", seed=11, duration_s=150.0, rate=1.5, fault_at_s=None))
    assert not any(r["contaminated"] for r in clean.labels.responses)
    faulty = Sim(SimConfig(profile="multilingual", seed=11, duration_s=150.0, rate=1.5, fault_at_s=50.0))
    assert list(clean.requests)[:50] == list(faulty.requests)[:50]
