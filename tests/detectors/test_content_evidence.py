"""Content detection beyond the window: long-horizon commonness, the public corpus, taint, and the cases where
content must stay silent (issue 10)."""

from __future__ import annotations

import numpy as np
from factories import TEXTS, request, response
from hypothesis import given, settings
from hypothesis import strategies as st

from detectors.commonness import TenantSpread
from detectors.monitor import Monitor, make_fingerprinter
from detectors.public import CorpusMismatch, PublicSet
from detectors.settings import DetectionSettings
from schemas.alert import Alert
from tests.support.live import observe_now

HOUR = 3600.0
DAY = 86400.0
# A passage no test text shares: the "public" one (a licence clause), and one private page of it.
LICENCE = (
    "Permission is hereby granted free of charge to any person obtaining a copy of this software and "
    "associated documentation files to deal in the software without restriction including without limitation "
    "the rights to use copy modify merge publish distribute sublicense and or sell copies of the software"
)


def _settings(**kw: object) -> DetectionSettings:
    # A pinned key: winnowing's selection depends on it, and a short text gives a run of 7 under some keys
    # (high) where it gives 8 (critical) under most; the claims here are about silence versus an alert.
    base: dict[str, object] = {
        "overlap_warmup_docs": 0,
        "overlap_warmup_s": 0,
        "domain_idle_s": 30 * DAY,
        "fingerprint_key": "content-evidence-tests",
    }
    return DetectionSettings(**(base | kw))


def _run(m: Monitor, events: list) -> list[Alert]:
    out: list[Alert] = []
    for e in events:
        out += observe_now(m, e)
    return out


def _quote(tenant: str, rid: str, ts: float, text: str) -> list:
    """A tenant that has `text` in its own prompt (and gets a harmless answer)."""
    return [request(rid, tenant, ts, text=text), response(rid, tenant, ts + 1, text="Noted, thank you.")]


def _echo(tenant: str, rid: str, ts: float, text: str) -> list:
    """A response to `tenant` that carries `text` its prompt did not hold."""
    return [request(rid, tenant, ts, text="Please help with my question."), response(rid, tenant, ts + 1, text=text)]


# --- the record itself ------------------------------------------------------------------------------
@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=200, unique=True), st.integers(1, 6))
def test_spread_counts_distinct_tenants_up_to_three(hashes: list[int], tenants: int) -> None:
    rec = TenantSpread(bits_log2=20)
    for i in range(tenants):
        for _ in range(3):  # a tenant re-sending the same text is still one tenant
            rec.add(f"t{i}", hashes, ts=float(i))
    assert rec.tenants(hashes).tolist() == [min(tenants, 3)] * len(hashes)
    assert rec.had("t0", hashes).all()
    assert not rec.had("someone-else", hashes).any()


def test_spread_keeps_text_in_use_across_generations_and_forgets_the_rest() -> None:
    rec = TenantSpread(bits_log2=16, capacity=1000, epoch_s=DAY)
    kept, dropped = list(range(1, 51)), list(range(1001, 1051))
    for i in range(3):
        rec.add(f"t{i}", kept + dropped, ts=0.0)
    # Two generations later: text re-used in each is still known with its spread; text not seen is gone.
    rec.add("t9", kept, ts=1.5 * DAY)
    rec.add("t9", kept, ts=3.0 * DAY)
    assert rec.rotations == 2
    assert (rec.tenants(kept) == 3).all()
    assert (rec.tenants(dropped) == 0).all()


def test_spread_false_positive_rate_is_bounded_at_capacity() -> None:
    rec = TenantSpread(bits_log2=20, capacity=100_000)
    rng = np.random.default_rng(7)
    seen = rng.integers(1, 2**63, size=100_000, dtype=np.uint64)
    for chunk in np.array_split(seen, 100):
        rec.add("a", chunk, ts=0.0)
    fresh = rng.integers(2**63, 2**64 - 1, size=50_000, dtype=np.uint64)
    observed = float((rec.tenants(fresh) > 0).mean())
    assert observed <= 2 * rec.false_positive_rate() + 0.002
    assert rec.state_size()["spread_bytes"] == 4 * (1 << 20) // 8


# --- must stay silent ----------------------------------------------------------------------------------
def test_public_text_quoted_by_many_tenants_over_days_is_not_a_leak() -> None:
    m = Monitor(_settings())
    # Over a week, five tenants quote the licence, never more than two in the same 15-minute window.
    events = []
    for day, tenant in enumerate(["t1", "t2", "t3", "t4"]):
        events += _quote(tenant, f"q{day}", day * DAY, LICENCE)
    events += _quote("t5", "q5", 5 * DAY, LICENCE)
    # The model echoes it unprompted to t6 a minute later: only t5 holds it in the window.
    events += _echo("t6", "e6", 5 * DAY + 60, LICENCE)
    assert _run(m, events) == []
    # Control: the same echo without the history is a critical leak from t5.
    fresh = Monitor(_settings())
    (a,) = _run(fresh, _quote("t5", "q5", 0, LICENCE) + _echo("t6", "e6", 60, LICENCE))
    assert (a.kind, a.severity, a.source_tenant_id) == ("cross_tenant_contamination", "critical", "t5")


def test_the_operator_corpus_makes_public_text_silent_from_the_start() -> None:
    s = _settings()
    fp = make_fingerprinter(s)
    public = PublicSet("winnow-v2", fp.key_id, fp.k, fp.w, fp.kgram_hashes(fp.text_hashes(LICENCE)).tolist())
    m = Monitor(s, public=public)
    assert _run(m, _quote("t5", "q5", 0, LICENCE) + _echo("t6", "e6", 60, LICENCE)) == []
    # Private text is still a leak with the corpus loaded.
    (a,) = _run(m, _quote("t7", "q7", 100, TEXTS[1]) + _echo("t8", "e8", 160, TEXTS[1]))
    assert (a.severity, a.source_tenant_id) == ("critical", "t7")


def test_a_corpus_made_with_another_key_is_refused() -> None:
    fp = make_fingerprinter(_settings())
    blob = PublicSet("winnow-v2", "other-key-id", fp.k, fp.w, [1, 2, 3]).to_bytes()
    public = PublicSet.from_bytes(blob)
    assert public.contains([1, 2, 4]).tolist() == [True, True, False]
    try:
        public.check("winnow-v2", fp.key_id, fp.k, fp.w)
    except CorpusMismatch as exc:
        assert "crosstalk corpus add" in str(exc)
    else:
        raise AssertionError("a corpus of another key was accepted")


def test_the_same_translation_source_given_by_two_tenants_is_explained_by_each_ones_prompt() -> None:
    m = Monitor(_settings())
    events = [
        request("a", "t1", 0, text="Translate into German:\n" + TEXTS[4]),
        response("a", "t1", 1, text="Wenn der Patient nach der zweiten Dosis über Schwindel klagt ..."),
        request("b", "t2", 30, text="Translate into Japanese:\n" + TEXTS[4]),
        # The answer quotes the source it was given: its own prompt explains it.
        response("b", "t2", 31, text="Source: " + TEXTS[4] + "\n患者が二回目の投与後にめまいを訴えた場合"),
    ]
    assert _run(m, events) == []


def test_a_session_re_sending_its_own_history_never_alerts() -> None:
    m = Monitor(_settings())
    history = ""
    events = []
    for turn in range(6):
        answer = f"{TEXTS[turn % len(TEXTS)]} (turn {turn})"
        events += [
            request(f"s{turn}", "alice", turn * 60, text=history + f"question {turn}", session_id="s1"),
            response(f"s{turn}", "alice", turn * 60 + 5, text=answer, session_id="s1"),
        ]
        history += f"question {turn}\n{answer}\n"
    assert _run(m, events) == []


# --- taint: a leaked passage stays its source's ------------------------------------------------------------
def test_a_victim_re_sending_a_leaked_passage_does_not_make_it_common() -> None:
    m = Monitor(_settings())
    events = _quote("src", "s0", 0, TEXTS[0])
    events += _echo("v1", "v0", 10, TEXTS[0])  # the first leak, to v1
    # v1 and v2 re-send what they received in later turns; without taint, three tenants would hold it.
    events += _quote("v1", "v1b", 20, TEXTS[0])
    events += _echo("v2", "v2a", 30, TEXTS[0])  # the second leak, to v2
    events += _quote("v2", "v2b", 40, TEXTS[0])
    events += _echo("v3", "v3a", 50, TEXTS[0])  # the third leak: still src's passage, still critical
    alerts = _run(m, events)
    assert [(a.tenant_id, a.severity, a.source_tenant_id) for a in alerts] == [
        ("v1", "critical", "src"),
        ("v2", "critical", "src"),
        ("v3", "critical", "src"),
    ]


def test_warm_up_counts_event_time_so_a_flood_of_junk_tenants_cannot_end_it() -> None:
    m = Monitor(_settings(overlap_warmup_docs=100, overlap_warmup_s=600))
    flood = []
    for i in range(200):  # 400 texts from 200 junk tenants within one minute
        flood += _quote(f"junk{i}", f"j{i}", i * 0.3, f"hello number {i} from a junk tenant")
    assert _run(m, flood) == []
    # Overlap alone is not an alert while the domain is young, whatever the flood.
    assert _run(m, _quote("src", "s0", 70, TEXTS[3]) + _echo("dst", "d0", 80, TEXTS[3][:200])) == []
    later = _quote("src2", "s1", 700, TEXTS[2]) + _echo("dst2", "d1", 710, TEXTS[2])
    # Warm at 700: the young domain's finding, held until then, is judged first (still a rare page), then the new one.
    held, a = _run(m, later)
    assert (held.tenant_id, held.severity, held.source_tenant_id) == ("dst", "critical", "src")
    assert held.ts >= 700 and held.evidence[0].figures["held_s"] == held.ts - 81
    assert (a.severity, a.source_tenant_id) == ("critical", "src2")
