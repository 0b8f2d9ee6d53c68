"""Delivery mix-ups across cache domains (detectors/fleet_mixup.py, ADR 0021): a gateway hands an answer to a client
of another pool, and each domain alone cannot see the pair; the fleet record's ledger does, fleet_delay_s later.

Every scenario here also runs through the embedded, direct and staged runners (tests/parity.py): in the direct
topology each domain is on its own partition, and the pair meets only through the fleet topic's delivery."""

from __future__ import annotations

import pickle
from collections import Counter

import pytest
from factories import high_on as _high
from factories import private_texts as _texts
from factories import request, response

from detectors.back import DomainTable
from detectors.monitor import Monitor
from detectors.settings import DetectionSettings
from schemas.alert import Alert

S = DetectionSettings(overlap_warmup_docs=0, overlap_warmup_s=0, fingerprint_key="fleet-mixup", fleet_delay_s=30.0)


def _run(settings: DetectionSettings, events: list[tuple[str, str, float, str, str, str]]) -> list[Alert]:
    """(request id, tenant, time, domain, prompt, answer) requests and responses, then an hour of quiet event time."""
    m = Monitor(settings)
    out: list[Alert] = []
    for rid, tenant, ts, domain, prompt, answer in events:
        out += m.observe(request(rid, tenant, ts, text=prompt, session_id=f"{tenant}-s", cache_domain=domain))
        out += m.observe(response(rid, tenant, ts + 2.0, domain=domain, text=answer, session_id=f"{tenant}-s"))
    out += m.observe(request("late", "Z", 4_000.0, text="nothing to see", cache_domain="d9"))
    return out + m.observe(response("late", "Z", 4_001.0, domain="d9", text="fine thanks"))


@pytest.mark.parametrize("seed", range(4))
def test_an_answer_handed_to_a_client_of_another_pool_is_high_and_names_its_owner(seed: int) -> None:
    doc, own, answer_words, warm = _texts(seed, 4)
    a_answer = " ".join(doc.split()[:30]) + " " + answer_words  # A's answer quotes A's document
    events = [(f"warm{i}", f"W{i}", 1.0 + i, d, warm, f"ok {warm}") for i, d in enumerate(["d1", "d2"] * 2)]
    events += [
        ("a1", "A", 100.0, "d1", f"summarise this please {doc}", a_answer),
        ("r1", "R", 100.5, "d2", f"what is the weather {own}", a_answer),  # the gateway handed R A's answer too
    ]
    # Alone, d2 cannot tell: A's prompt was never there.
    assert _high(_run(S.model_copy(update={"fleet_mixups": False}), events), "R") == []
    (alert,) = _high(_run(S, events), "R")
    f = alert.evidence[0].figures
    assert alert.source_tenant_id == "A" and alert.cache_domain == "d2" and f["delivery_mixup"] == "copy"
    assert f["source_request_ids"] == ["a1"] and alert.request_ids == ["r1"]
    assert alert.ts >= 102.5 + S.fleet_delay_s  # found where the fleet record learns: its delay after the pair


@pytest.mark.parametrize("seed", range(4))
def test_two_answers_crossed_between_pools_are_each_high(seed: int) -> None:
    doc_a, doc_b, words_a, words_b = _texts(seed, 4)
    ans_a = " ".join(doc_a.split()[:30]) + " " + words_a  # the answer to A's prompt, quoting A's document
    ans_b = " ".join(doc_b.split()[:30]) + " " + words_b
    events = [
        ("a1", "A", 100.0, "d1", f"explain {doc_a}", ans_b),  # A got B's answer
        ("b1", "B", 100.2, "d2", f"explain {doc_b}", ans_a),  # and B got A's
    ]
    alerts = _run(S, events)
    assert [a.source_tenant_id for a in _high(alerts, "A")] == ["B"]
    assert [a.source_tenant_id for a in _high(alerts, "B")] == ["A"]


def test_a_pair_in_one_domain_is_left_to_the_domain() -> None:
    doc, own, words, _ = _texts(7, 4)
    answer = " ".join(doc.split()[:30]) + " " + words
    events = [
        ("a1", "A", 100.0, "d1", f"summarise this please {doc}", answer),
        ("r1", "R", 100.5, "d1", f"what is the weather {own}", answer),
    ]
    with_fleet, without = (
        _high(_run(S, events), "R"),
        _high(_run(S.model_copy(update={"fleet_mixups": False}), events), "R"),
    )
    assert [a.alert_id for a in with_fleet] == [a.alert_id for a in without] and len(with_fleet) == 1


def test_one_answer_to_two_pools_that_neither_prompt_explains_concludes_nothing() -> None:
    # The same public text translated for two tenants in two pools: one answer, and neither prompt says whose (both
    # prompts hold the text, so it is one question asked twice: ADR 0028).
    text, own_a, own_b, source = _texts(11, 4)
    events = [
        ("a1", "A", 100.0, "d1", f"{own_a} translate {source}", text),
        ("b1", "B", 100.5, "d2", f"{own_b} translate {source}", text),
    ]
    alerts = _run(S, events)
    assert _high(alerts, "A") == [] and _high(alerts, "B") == []


def test_a_stock_answer_many_tenants_of_another_pool_were_given_is_no_ones_in_every_topology() -> None:
    # Four tenants of pool d1 were given one stock answer before R, in pool d2, got it too: over the fleet it is the
    # model's habit, and R's answer is no one's. A staged topology whose d1 partition lags hears d1's digests after
    # their time, in one message; learned one by one, the first was checked against R's delivery before the others
    # made the text common, and its tenant was named (the parity fixture runs this through the three runners).
    stock, *prompts = _texts(12, 7)
    events = [(f"s{i}", f"S{i}", 20.0 + 5 * i, "d1", prompts[i], stock) for i in range(4)]
    events += [("w1", "W", 90.0, "d2", prompts[4], "an answer of its own"), ("r1", "R", 100.0, "d2", prompts[5], stock)]
    assert _high(_run(S, events), "R") == []


def test_a_restored_table_raises_what_the_replayed_fleet_finds_on_what_it_judged() -> None:
    # A partition's snapshot taken before the fleet learned the pair: the record is not in it, but what it judged is;
    # its worker hears the digests again from the fleet topic (kafka.fleet_replay_s), and the restored table raises.
    doc, own, words, _ = _texts(3, 4)
    answer = " ".join(doc.split()[:30]) + " " + words
    m = Monitor(S)
    m.table.told = []  # what a Kafka partition tells the fleet topic
    for rid, tenant, domain, prompt in (("a1", "A", "d1", f"summarise {doc}"), ("r1", "R", "d2", f"weather {own}")):
        m.observe(request(rid, tenant, 100.0, text=prompt, session_id=f"{tenant}-s", cache_domain=domain))
        m.observe(response(rid, tenant, 102.0, domain=domain, text=answer, session_id=f"{tenant}-s"))
    heard = list(m.table.told)
    fresh = pickle.loads(pickle.dumps(m.table))  # the partition's table as its snapshot restores it
    fresh.advance_fleet(500.0)
    assert fresh.fleet.pending == 0 and fresh.take_flushed() == []  # nothing heard yet: nothing found
    restored = pickle.loads(pickle.dumps(m.table))
    for d in heard:
        restored.fleet.push(d)
    restored.advance_fleet(500.0)
    assert [a.source_tenant_id for a in _high(restored.take_flushed(), "R")] == ["A"]
    # Control: a table that judged neither (another partition's) hears the same and raises nothing.
    other = DomainTable(S, Counter())
    for d in heard:
        other.fleet.push(d)
    other.advance_fleet(500.0)
    assert other.take_flushed() == []
