"""The fleet record (detectors/fleet.py): what the model writes is learned over every domain, with its provenance.

Before it each domain learned the model's habits alone: a stock opener the model had written for tenants of four
other domains was, in a fifth, a page of the one tenant there that had it (ext-v2: two thirds of its false highs)."""

from __future__ import annotations

import pickle
import random
from collections import Counter

import numpy as np
import pytest
from factories import request, response

from detectors.back import DomainTable
from detectors.fleet import Digest, Fleet
from detectors.monitor import Monitor
from detectors.settings import DetectionSettings
from schemas.alert import SEVERITY_RANK, Alert
from tests.support.live import observe_now

WORDS = [f"q{i:04d}" for i in range(5000)]  # private vocabulary: no chance k-grams between random texts
S = DetectionSettings(overlap_warmup_docs=4, overlap_warmup_s=0, fingerprint_key="fleet-record")


def _high(alerts: list[Alert]) -> list[Alert]:
    return [a for a in alerts if a.tenant_id == "R" and SEVERITY_RANK[a.severity] >= SEVERITY_RANK["high"]]


def _world(seed: int, sessions: list[tuple[str, str, str]], settings: DetectionSettings = S) -> list[Alert]:
    """Each (tenant, domain, where) is a session holding one 24-word phrase in the model's answer (`output`), or in the
    tenant's prompt and the answer (`both`); then R's answer in domain d1 holds the phrase between R's own words.
    Returns the alerts on R's answer."""
    rng = random.Random(seed)
    pool = rng.sample(WORDS, 400)
    phrase, own, other = " ".join(pool[:24]), pool[24:84], pool[84:]
    m = Monitor(settings)
    for i, (tenant, domain, where) in enumerate(sessions):
        sid, words = f"{tenant}-{i}", " ".join(other[i * 10 : i * 10 + 10])
        prompt = f"{words} {phrase}" if where == "both" else words
        observe_now(m, request(f"{tenant}{i}", tenant, 1.0 + i, text=prompt, session_id=sid))
        observe_now(
            m, response(f"{tenant}{i}", tenant, 1.5 + i, text=f"{phrase} {words}", session_id=sid, domain=domain)
        )
    for j in range(4):  # d1 warms up on unrelated traffic
        words = " ".join(other[200 + j * 10 : 210 + j * 10])
        observe_now(m, request(f"w{j}", f"W{j}", 30.0 + j, text=words, session_id=f"w{j}"))
        observe_now(m, response(f"w{j}", f"W{j}", 30.5 + j, text=f"ok {words}", session_id=f"w{j}", domain="d1"))
    observe_now(m, request("r1", "R", 50, text="tell me something", session_id="r"))
    answer = " ".join(own[:20]) + f" {phrase} " + " ".join(own[20:40])
    return _high(observe_now(m, response("r1", "R", 51, text=answer, session_id="r", domain="d1")))


@pytest.mark.parametrize("seed", range(6))
def test_a_phrase_the_model_wrote_in_another_domain_is_its_habit_in_this_one(seed: int) -> None:
    # In d1 only A's one session had it: alone, d1 would read R's answer as a page of A. The model wrote it for C in d2
    # too: two sessions' answers over the fleet, the model's habit.
    assert _world(seed, [("A", "d1", "output"), ("C", "d2", "output")]) == []
    # Control: without C's session in d2 the same answer is a page of A's.
    assert [a.source_tenant_id for a in _world(seed, [("A", "d1", "output")])] == ["A"]


@pytest.mark.parametrize("seed", range(6))
def test_a_document_a_tenant_authored_in_another_domain_stays_its_own_where_it_leaks(seed: int) -> None:
    # A's prompt brought the text in d2, and the model quoted it there in two of A's sessions; then A sends it in d1
    # too. The model had written it before A's d1 prompt, but a prompt introduced it first: A's, and a page of it in
    # R's answer is a leak (provenance is the fleet's, like the sessions).
    sessions = [("A", "d2", "both"), ("A", "d2", "both"), ("A", "d1", "both")]
    assert [a.source_tenant_id for a in _world(seed, sessions)] == ["A"]


def test_every_domain_of_a_table_reads_one_record_and_a_copy_keeps_it_shared() -> None:
    table = DomainTable(S, Counter())
    one, two = table.get("d1", 1.0), table.get("d2", 1.0)
    assert one.overlap.fleet is two.overlap.fleet is table.fleet
    copy = pickle.loads(pickle.dumps(table))
    assert all(dm.overlap.fleet is copy.fleet for dm in copy.domains.values())
    assert copy.fleet is not table.fleet


def _digest(ts: float, rid: str, output: list[int], prompt: list[int] | None = None) -> Digest:
    return Digest(ts, rid, f"T\x1f{rid}", np.asarray(prompt or [], dtype=np.uint64).tobytes(),
                  np.asarray(output, dtype=np.uint64).tobytes())  # fmt: skip


def _sessions(fleet: Fleet, fp: int) -> int:
    return int(fleet.sessions(np.asarray([fp], dtype=np.uint64))[0])


def test_a_digest_is_learned_its_delay_after_its_exchange_in_event_time_order() -> None:
    fleet = Fleet(S.model_copy(update={"fleet_delay_s": 30.0}))
    fleet.push(_digest(10.0, "b", [7]))
    fleet.push(_digest(5.0, "a", [7]))  # pushed later, older: learned first
    fleet.advance(36.0)
    assert _sessions(fleet, 7) == 1 and fleet.pending == 1
    fleet.advance(40.0)
    assert _sessions(fleet, 7) == 2 and fleet.pending == 0 and fleet.late == 0


def test_a_digest_that_comes_after_its_time_is_learned_with_its_delivery_and_counted() -> None:
    fleet = Fleet(S.model_copy(update={"fleet_delay_s": 30.0}))
    fleet.advance(100.0)
    fleet.push(_digest(30.0, "a", [9]))  # due at 60, event time is 100
    fleet.push(_digest(31.0, "b", [9]))  # the same message from a lagging partition
    assert _sessions(fleet, 9) == 0 and fleet.late == 2 and fleet.pending == 2
    fleet.settle()  # what a runner calls once the message is handed over (DomainTable.drain_fleet)
    assert _sessions(fleet, 9) == 2 and fleet.pending == 0
    fleet.push(_digest(32.0, "c", [9]))
    fleet.advance(101.0)  # or the table's next step, whichever comes first
    assert _sessions(fleet, 9) == 3 and fleet.pending == 0 and fleet.late == 3
    # Due at 95, heard at 101: after its time by less than the delay, and late all the same (the record had learned
    # every exchange up to 71 without it).
    fleet.push(_digest(65.0, "d", [9]))
    assert fleet.late == 4 and fleet.pending == 1


def test_prompt_text_is_authored_only_if_the_model_had_not_written_it() -> None:
    fleet = Fleet(S.model_copy(update={"fleet_delay_s": 0.0}))
    fleet.push(_digest(1.0, "a", [1], prompt=[2]))  # 2 came in a prompt first: authored; 1 the model wrote
    fleet.push(_digest(2.0, "b", [3], prompt=[1]))  # a history re-sending the model's 1: not authored
    fleet.advance(3.0)
    assert fleet.authored(np.asarray([1, 2, 3], dtype=np.uint64)).tolist() == [False, True, False]


def test_the_digests_waiting_their_delay_are_bounded_oldest_learned_first() -> None:
    fleet = Fleet(S.model_copy(update={"fleet_delay_s": 600.0, "fleet_pending_hashes": 3}))
    for i in range(5):
        fleet.push(_digest(float(i), f"r{i}", [100 + i]))
    assert fleet.pending == 3
    assert [_sessions(fleet, 100 + i) for i in range(5)] == [1, 1, 0, 0, 0]
