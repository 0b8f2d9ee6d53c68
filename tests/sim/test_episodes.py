"""Time to detect per leak episode (streams/sim/episodes.py): episodes split on quiet, per domain; cold ones are
those of a domain's first minutes; an episode never flagged high is counted, not left out."""

from __future__ import annotations

import json
from pathlib import Path

from factories import incident_alert

from streams.sim.episodes import (
    Leak,
    episode_figures,
    episodes,
    episodes_met,
    flagged_times,
    from_events,
    from_labels,
    paged_times,
)
from streams.sim.evaluate import evaluate


def _row(rid: str, ts: float, domain: str = "d1", contaminated: bool = True) -> dict:
    return {"request_id": rid, "ts": ts, "cache_domain": domain, "contaminated": contaminated, "status_code": 200,
            "tenant_id": "t1", "source_tenant_id": "t2" if contaminated else None}  # fmt: skip


def test_leaks_apart_by_more_than_the_quiet_period_are_two_episodes_each_timed_from_its_own_first_leak() -> None:
    leaks = [Leak("a", 1000.0, "d"), Leak("b", 1100.0, "d"), Leak("c", 2000.0, "d"), Leak("e", 2010.0, "d")]
    # The first episode is found at once; the second only on its second leak, 90 s after its first.
    found = episodes(leaks, {"d": 0.0}, {"a": 1000.0, "e": 2090.0}, quiet_s=600.0, warmup_s=600.0)
    assert [(e.first_ts, e.leaks, e.cold, e.delay_s) for e in found] == [
        (1000.0, 2, False, 0.0),
        (2000.0, 2, False, 90.0),
    ]
    assert episode_figures(found)["ttd_warm_s"] == 90.0  # the run's first leak -> first high would say 0 s
    # How late a flagged leak was: "e" waited 80 s for its own alert; "b" and "c" were never flagged.
    assert [e.late_s for e in found] == [0.0, 80.0] and episode_figures(found)["late_warm_s"] == 80.0


def test_an_episode_in_a_domains_warm_up_is_cold_and_one_never_flagged_is_counted() -> None:
    leaks = [Leak("a", 100.0, "d1"), Leak("b", 5000.0, "d2")]
    found = episodes(leaks, {"d1": 0.0, "d2": 4000.0}, {"a": 700.0}, warmup_s=600.0)
    f = episode_figures(found)
    assert (f["episodes_cold"], f["episodes_cold_missed"], f["ttd_cold_s"]) == (1, 0, 600.0)
    # d2's leak came 1,000 s after its first response: warm, and never flagged high.
    assert (f["episodes_warm"], f["episodes_warm_missed"], f["ttd_warm_s"]) == (1, 1, None)


def test_domains_are_apart_even_when_their_leaks_interleave_in_time() -> None:
    leaks = [Leak("a", 1000.0, "d1"), Leak("b", 1001.0, "d2"), Leak("c", 1002.0, "d1")]
    found = episodes(leaks, {"d1": 0.0, "d2": 0.0}, {"a": 1000.0, "c": 1002.0})
    assert [(e.domain, e.leaks, e.delay_s) for e in found] == [("d1", 2, 0.0), ("d2", 1, None)]


def test_only_high_alerts_flag_and_the_earliest_counts() -> None:
    marks = (("a", "warning", 5.0), ("a", "high", 9.0), ("a", "critical", 7.0), ("b", "warning", 1.0))
    alerts = [incident_alert(rid, "i", None, sev, ts=ts) for rid, sev, ts in marks]
    assert flagged_times(alerts) == {"a": 7.0}


def test_evaluate_reports_a_late_second_episode_that_the_runs_first_leak_hides() -> None:
    rows = [_row("clean", 0.0, contaminated=False), _row("l1", 1000.0), _row("l2", 3000.0), _row("l3", 3030.0)]
    alerts = [incident_alert("l1", "i1", "high", ts=1000.0), incident_alert("l3", "i2", "high", ts=3100.0)]
    ev = evaluate({"responses": rows}, alerts)
    assert ev.detection_delay_s == 0.0  # the run's first leak was flagged at once
    assert ev.episodes["episodes_warm"] == 2 and ev.episodes["ttd_warm_s"] == 100.0
    assert from_labels(rows)[1] == {"d1": 0.0}


def test_episodes_are_read_from_an_event_file_when_labels_have_no_times(tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    lines = [
        {"type": "request", "request_id": "x", "ts": "2026-08-27T06:00:00.000Z", "cache_domain": "d"},
        {"type": "response", "request_id": "x", "ts": "2026-08-27T06:00:01.000Z", "cache_domain": "d"},
        {"type": "response", "request_id": "leak", "ts": "2026-08-27T06:20:01.500Z", "cache_domain": "d"},
        {"type": "cache_stats", "ts": 1.0, "cache_domain": "d"},
    ]
    events.write_text("\n".join(json.dumps(e) for e in lines) + "\n")
    leaks, start = from_events(events, {"leak"})
    assert [(lk.request_id, lk.ts - start["d"], lk.domain) for lk in leaks] == [("leak", 1200.5, "d")]


def test_the_time_to_detect_target_needs_every_episode_flagged_warm_ones_in_60_s_cold_ones_in_the_hold() -> None:
    f = {"episodes_warm": 2, "episodes_warm_missed": 0, "ttd_warm_s": 60.0, "episodes_cold": 1, "ttd_cold_s": 600.0}
    assert episodes_met(f)
    assert not episodes_met(f | {"ttd_warm_s": 61.0})
    assert not episodes_met(f | {"ttd_cold_s": 601.0})
    assert not episodes_met(f | {"episodes_cold_missed": 1})  # an episode never flagged has no delay to compare


def test_an_episode_is_paged_when_an_alert_on_one_of_its_leaks_has_its_incident_high() -> None:
    # l1's alert is high but its incident still a warning (uncorroborated, ADR 0018); l2's incident pages 40 s in.
    alerts = [incident_alert("l1", "i1", "warning", ts=1000.0), incident_alert("l2", "i1", "high", ts=1040.0)]
    assert paged_times(alerts) == {"l2": 1040.0}
    leaks = [Leak("l1", 1000.0, "d"), Leak("l2", 1030.0, "d"), Leak("l3", 5000.0, "d")]
    found = episodes(leaks, {"d": 0.0}, flagged_times(alerts), paged_at=paged_times(alerts))
    assert [(e.delay_s, e.page_s) for e in found] == [(0.0, 40.0), (None, None)]
    f = episode_figures(found)
    assert (f["ttp_warm_s"], f["episodes_warm_unpaged"]) == (40.0, 1)
