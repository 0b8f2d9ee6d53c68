"""A cold domain holds the findings a warm one would raise on content alone, and judges them once it can
(detectors/held.py): after `overlap_hold_s`, when the held list is full, when the domain goes idle, at the end of
input."""

from __future__ import annotations

import random

import pytest
from factories import TEXTS, request, response
from hypothesis import given
from hypothesis import strategies as st

from detectors.domain import DomainMonitor
from detectors.held import standing
from detectors.monitor import Monitor
from detectors.settings import DetectionSettings
from schemas.alert import Alert
from tests.support.live import observe_now

HOLD = 600.0  # event time a held finding waits (overlap_hold_s)


def _settings(**kw: object) -> DetectionSettings:
    base: dict[str, object] = {
        "overlap_warmup_docs": 10**6,
        "overlap_warmup_slow_docs": 10**6,
        "fingerprint_key": "held-findings-tests",
    }
    return DetectionSettings(**(base | kw))


def _run(m: Monitor, events: list) -> list[Alert]:
    return [a for e in events for a in observe_now(m, e)]


def _quote(tenant: str, rid: str, ts: float, text: str) -> list:
    return [request(rid, tenant, ts, text=text), response(rid, tenant, ts + 1, text="Noted, thank you.")]


def _echo(tenant: str, rid: str, ts: float, text: str) -> list:
    return [request(rid, tenant, ts, text="Please help with my question."), response(rid, tenant, ts + 1, text=text)]


def test_a_cold_finding_is_raised_after_the_hold_if_its_page_is_still_rare() -> None:
    m = Monitor(_settings())
    assert _run(m, _quote("src", "s0", 50, TEXTS[0]) + _echo("dst", "d0", 60, TEXTS[0])) == []
    assert _run(m, _quote("x", "x0", 61 + HOLD - 10, "an unrelated question before the hold is over")) == []
    (a,) = _run(m, _quote("x", "x1", 61 + HOLD, "an unrelated question once it is over"))
    assert (a.tenant_id, a.source_tenant_id, a.request_ids) == ("dst", "src", ["d0"])
    assert a.severity == "critical"
    # Judged on the first event once the hold is over (the request, not its domain's next exchange), at the event
    # time it was judged at: its delay shows.
    assert a.ts == 61 + HOLD
    assert a.evidence[0].figures["held_s"] == HOLD
    assert "held while its domain was cold" in a.summary


def test_a_cold_finding_on_text_that_turned_out_common_is_dismissed() -> None:
    m = Monitor(_settings())
    events = _quote("src", "s0", 50, TEXTS[1]) + _echo("dst", "d0", 60, TEXTS[1])
    # While it is held, more tenants quote the same text: public text, not a page of src's.
    events += _quote("c", "c0", 100, TEXTS[1]) + _quote("d", "d0x", 110, TEXTS[1])
    assert _run(m, events) == []
    assert _run(m, _quote("x", "x0", 61 + HOLD, "an unrelated question once the hold is over")) == []
    assert m.flush() == []


def test_held_findings_are_judged_at_the_end_of_input() -> None:
    m = Monitor(_settings())
    assert _run(m, _quote("src", "s0", 0, TEXTS[2]) + _echo("dst", "d0", 10, TEXTS[2])) == []
    (a,) = m.flush()
    assert (a.tenant_id, a.source_tenant_id, a.ts) == ("dst", "src", 11)


def test_the_held_list_is_bounded_and_its_oldest_is_judged_first() -> None:
    m = Monitor(_settings(overlap_held_max=2))
    events = _quote("src", "s0", 0, TEXTS[0] + " " + TEXTS[2] + " " + TEXTS[3])
    for i in range(2):
        events += _echo(f"dst{i}", f"d{i}", 10 + 10 * i, TEXTS[0] if i == 0 else TEXTS[2])
    assert _run(m, events) == []
    # The third held (another page of src's: a page that reached two receivers is shared by then, ADR 0004):
    # the first is judged now.
    (a,) = _run(m, _echo("dst2", "d2", 40, TEXTS[3]))
    assert (a.request_ids, a.ts) == (["d0"], 41)
    assert sorted(r for a in m.flush() for r in a.request_ids) == ["d1", "d2"]


def test_held_findings_survive_a_snapshot() -> None:
    settings = _settings()
    m = Monitor(settings)
    assert _run(m, _quote("src", "s0", 0, TEXTS[0]) + _echo("dst", "d0", 10, TEXTS[0])) == []
    (dm,) = m.domains.values()
    restored = DomainMonitor.loads(dm.dumps(), settings)
    assert len(restored.overlap.held) == 1
    (a,) = restored.flush()
    assert (a.tenant_id, a.source_tenant_id) == ("dst", "src")


def test_holding_can_be_switched_off() -> None:
    m = Monitor(_settings(overlap_hold_cold=False))
    assert _run(m, _quote("src", "s0", 0, TEXTS[0]) + _echo("dst", "d0", 10, TEXTS[0])) == []
    assert m.flush() == []


@given(st.lists(st.booleans(), max_size=40), st.integers(0, 4))
def test_standing_is_the_longest_run_of_unexplained_through_short_gaps(flags: list[bool], bridge: int) -> None:
    # Reference: split at every gap longer than `bridge`, count the unexplained in each piece.
    pieces, cur, gap = [], 0, 0
    for f in flags:
        if f:
            cur, gap = cur + 1, 0
        else:
            gap += 1
            if gap > bridge:
                pieces.append(cur)
                cur = 0
    pieces.append(cur)
    assert standing(flags, bridge) == max(pieces)


def test_a_page_the_source_quoted_itself_is_still_its_own_when_judged() -> None:
    # The source's answer quotes its own prompt (one session of the model's), and the held receiver's output was
    # learned while cold (a second): two sessions, yet the text came from a prompt and only the receiver got it.
    m = Monitor(_settings())
    events = [
        request("s0", "src", 0, text=TEXTS[1]),
        response("s0", "src", 1, text="You wrote: " + TEXTS[1]),
        *_echo("dst", "d0", 10, TEXTS[1]),
    ]
    assert _run(m, events) == []
    (a,) = m.flush()
    assert (a.tenant_id, a.source_tenant_id, a.request_ids) == ("dst", "src", ["d0"])


def test_held_findings_are_counted_in_the_state_size() -> None:
    m = Monitor(_settings())
    _run(m, _quote("src", "s0", 0, TEXTS[2]) + _echo("dst", "d0", 10, TEXTS[2]))
    assert (m.state_size()["held_findings"], m.state_size()["held_total"]) == (1, 1)
    m.flush()
    size = m.state_size()
    assert (size["held_findings"], size["held_total"], size["held_raised"], size["held_dismissed"]) == (0, 1, 1, 0)


def test_a_held_finding_comes_out_on_any_event_once_the_hold_is_over() -> None:
    """Issue 40: a finding waited for its own domain's next exchange; an event of any domain now judges it."""
    m = Monitor(_settings())
    assert _run(m, _quote("src", "s0", 50, TEXTS[0]) + _echo("dst", "d0", 60, TEXTS[0])) == []
    other = [request("o1", "x", 61 + HOLD, cache_domain="d2"), response("o1", "x", 62 + HOLD, domain="d2")]
    (a,) = _run(m, other)
    assert (a.cache_domain, a.tenant_id, a.request_ids, a.ts) == ("d1", "dst", ["d0"], 61 + HOLD)


def test_a_held_finding_comes_out_by_the_clock_with_no_further_input() -> None:
    """A runner on the wall clock ticks the core with its time (`Monitor.tick`): no event needs to follow."""
    m = Monitor(_settings())
    assert _run(m, _quote("src", "s0", 50, TEXTS[0]) + _echo("dst", "d0", 60, TEXTS[0])) == []
    assert m.tick(61 + HOLD - 1) == []
    (a,) = m.tick(61 + HOLD)
    assert (a.tenant_id, a.request_ids, a.ts) == ("dst", ["d0"], 61 + HOLD)
    assert m.counters["alerts.cross_tenant_contamination.critical"] == 1 and m.tick(10 * HOLD) == []


def test_the_clock_judges_only_live_input() -> None:
    """A log far older than the clock (replayed through a live runner) is judged by event time, as in a replay: the
    clock would judge every held finding at once, before the domain learned what follows."""
    m = Monitor(_settings())
    assert _run(m, _quote("src", "s0", 50, TEXTS[0]) + _echo("dst", "d0", 60, TEXTS[0])) == []
    assert m.tick(61 + 2 * HOLD + 60) == []  # the newest event is more than twice the hold behind the clock
    assert len(m.flush()) == 1  # still held, and judged at the end


@pytest.mark.parametrize("writers", [0, 1, 2])
def test_a_page_two_receivers_got_is_the_models_habit_once_enough_other_sessions_wrote_it(writers: int) -> None:
    """A held page that reached two receivers while the domain was cold stands unless the model wrote it in
    `common_min_sessions` (2) sessions besides theirs. The record counts sessions far enough for that subtraction
    (detectors/fleet.py `model_record`): with a count that stopped at 3, two receivers plus any number of other
    sessions was 3 - 2 = 1, never the model's habit."""
    from detectors.held import HeldRun
    from detectors.signals.overlap import OverlapDetector

    s = _settings()
    det = OverlapDetector(s)
    rng = random.Random(writers)
    page = [rng.getrandbits(64) for _ in range(12)]
    sessions = ["dst-a\x1fs1", "dst-b\x1fs1"] + [f"w{i}\x1fs{i}" for i in range(writers)]
    for i, key in enumerate(sessions):
        det.model_spread.add(key, page, float(i))
        det.spread.add(key.split("\x1f")[0], page, float(i))
    receivers = {("src", h): {"dst-a", "dst-b"} for h in page}
    run = HeldRun(page, len(page), True)
    assert det.model_spread.tenants(page).tolist() == [min(len(sessions), det.model_spread.levels)] * len(page)
    assert det._stands(run, "src", 3, receivers) == (writers < s.common_min_sessions)
