"""The report's core pieces: bounded timeline, alert folding, evidence in words, escaping, unreadable input."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import orjson
import pytest

from schemas.alert import Alert, Lead, Signal
from streams.report.command import add_arguments, run
from streams.report.html import render
from streams.report.model import build_report
from streams.report.sources import Problems, read_alert_files, read_events
from streams.report.timeline import Timeline
from streams.report.words import describe

T0 = 1_787_821_200.0


def alert(rid: str, tenant: str, source: str | None, ts: float = T0 + 10, **over: Any) -> Alert:
    evidence = [
        {
            "name": "overlong_accepted",
            "severity": "high",
            "score": 0.7,
            "figures": {
                "prompt_tokens": 723241,
                "prefill_capacity_tokens": 681280,
                "excess_tokens": 41961,
                "status_code": 200,
            },
        }
    ]
    if source:
        evidence.append(
            {
                "name": "cross_tenant_contamination",
                "severity": "critical",
                "score": 0.9,
                "source_tenant_id": source,
                "figures": {
                    "output_fingerprints": 11,
                    "matched_fingerprints": 5,
                    "longest_run": 5,
                    "matched_share": 0.4545,
                    "source_request_ids": [f"src-of-{rid}"],
                    "corroborated": True,
                },
            }
        )
    data = {
        "alert_id": f"a-{rid}",
        "ts": ts,
        "kind": "cross_tenant_contamination" if source else "overlong_accepted",
        "severity": "critical" if source else "high",
        "cache_domain": "pd-1",
        "tenant_id": tenant,
        "source_tenant_id": source,
        "request_ids": [rid],
        "score": 1.0,
        "evidence": evidence,
        "summary": "…",
        "group_key": "cache_domain=pd-1,category=exposure",
        "incident_id": "inc-1",
        **over,
    }
    return Alert.model_validate(data)


def test_timeline_memory_is_bounded_and_counts_are_kept() -> None:
    tl = Timeline(set(), max_buckets=50, max_pending=10)
    n = 20_000
    for i in range(n):
        ts = T0 + i * 45.0  # ~10 days
        tl.feed(
            {
                "type": "cache_stats",
                "ts": ts,
                "cache_domain": "pd-1",
                "role": "prefill",
                "capacity_tokens": 1000,
                "used_tokens": i % 1000,
            }
        )
        big = 5000 if i % 100 == 0 else 10
        tl.feed(
            {
                "type": "request",
                "ts": ts,
                "request_id": f"r{i}",
                "tenant_id": f"t{i % 7}",
                "prompt_tokens": big,
                "cache_domain": "pd-1",
            }
        )
        tl.feed(
            {
                "type": "response",
                "ts": ts + 1,
                "request_id": f"r{i}",
                "tenant_id": f"t{i % 7}",
                "cache_domain": "pd-1",
                "status_code": 200 if i % 200 else 400,
            }
        )
    tl.finish()
    series = tl.domains["pd-1"]
    assert len(series.buckets) <= 50
    assert sum(b.requests for b in series.buckets.values()) == n == series.requests
    assert series.overlong == n // 100
    assert series.overlong_accepted == n // 100 - n // 200  # every second over-long one was refused
    assert max(b.max_used_share for b in series.buckets.values()) == pytest.approx(0.999)
    assert tl.width >= n * 45.0 / 50
    assert tl.tenants == {f"t{i}" for i in range(7)}


def test_requests_without_domain_wait_for_their_response_within_a_bound() -> None:
    tl = Timeline({"r1"}, max_pending=2)
    for i in range(4):
        tl.feed({"type": "request", "ts": T0 + i, "request_id": f"r{i}", "tenant_id": "a", "prompt_tokens": 100})
    # r0 and r1 were pushed out by r2 and r3: counted, not guessed.
    tl.feed(
        {
            "type": "response",
            "ts": T0 + 5,
            "request_id": "r3",
            "tenant_id": "a",
            "cache_domain": "pd-9",
            "status_code": 200,
        }
    )
    tl.finish()
    assert tl.domains["pd-9"].requests == 1
    assert tl.counters["requests_without_domain_unplaced"] == 3  # r0, r1 evicted; r2 never answered
    assert tl.requests["r1"].prompt_tokens == 100


def test_duplicates_are_folded_and_sources_told(tmp_path: Path) -> None:
    a = alert("r1", "victim", "origin")
    report = build_report([a, a, alert("r2", "victim", None, ts=T0 + 20)])
    assert report.duplicates == 1 and report.alerts == 2
    assert [r.request_id for r in report.affected] == ["r1", "r2"]
    views = {v.tenant_id: v for v in report.tenants}
    assert len(views["victim"].received) == 2
    assert views["origin"].leaked_request_ids == ["src-of-r1"]
    assert report.affected[1].origin_known is False  # the mechanism alone: origin not identified


def test_a_response_with_warnings_alone_is_a_lead_and_owed_no_notice(tmp_path: Path) -> None:
    """ADR 0008: an echo of whole sentences (a warning) is a lead to look into, not a disclosure."""
    echo = {
        "name": "cross_tenant_contamination",
        "severity": "warning",
        "score": 0.7,
        "source_tenant_id": "quoted",
        "figures": {"output_fingerprints": 40, "matched_fingerprints": 6, "longest_run": 6, "matched_share": 0.15,
                    "source_request_ids": ["src-q"], "whole_sentences": True},
    }  # fmt: skip
    lead = alert("r3", "reader", "quoted", ts=T0 + 30, severity="warning", kind="cross_tenant_contamination",
                 evidence=[echo])  # fmt: skip
    report = build_report([alert("r1", "victim", "origin"), lead])
    assert [r.request_id for r in report.affected] == ["r1"]
    assert [r.request_id for r in report.leads] == ["r3"]
    views = {v.tenant_id: v for v in report.tenants}
    assert "reader" not in views and "quoted" not in views  # nobody is notified of a lead
    assert all(leak.request_id != "r3" for leak in report.leaks)
    assert "a lead, not a disclosure" in describe(echo["name"], echo["figures"], "quoted", name_of=str)
    html = render(report, title="t", inputs=["a.jsonl"], problems=Problems())
    assert 'id="leads-table"' in html and 'data-request-id="r3"' in html
    # Only leads: the report says no response was affected.
    assert build_report([lead]).clean


def test_incident_starts_at_its_first_request_when_events_say_so() -> None:
    tl = Timeline({"r1"})
    tl.feed(
        {
            "type": "request",
            "ts": T0 + 4,
            "request_id": "r1",
            "tenant_id": "victim",
            "prompt_tokens": 723241,
            "cache_domain": "pd-1",
        }
    )
    report = build_report([alert("r1", "victim", "origin", ts=T0 + 10)], tl)
    (inc,) = report.incidents
    assert inc.start == T0 + 4 and inc.time_to_first_alert_s == pytest.approx(6.0)
    assert report.affected[0].prompt_tokens == 723241


def test_evidence_in_words() -> None:
    figures = {"matched_fingerprints": 5, "output_fingerprints": 11, "matched_share": 0.4545, "longest_run": 5}
    figures["source_request_ids"] = ["req-x"]
    said = describe("cross_tenant_contamination", figures, "t-9", name_of=lambda t: f"tenant {t}")
    assert (
        said.startswith("5 of the response's 11 text fingerprints (45 %") and "tenant t-9" in said and "req-x" in said
    )
    hidden = describe("cross_tenant_contamination", figures, "t-9", name_of=lambda t: "another tenant", private=False)
    assert "req-x" not in hidden and "t-9" not in hidden and "another tenant" in hidden
    assert "681,280" in describe(
        "capacity_gap",
        {"context_window": 1048576, "prefill_capacity_tokens": 681280, "gap_tokens": 367296},
        None,
        name_of=str,
    )
    # A signal of a newer version still reads as words, never as JSON.
    assert describe("new_signal", {"some_figure": 1234567}, None, name_of=str) == "New signal: some figure = 1,234,567."


def test_everything_from_the_input_is_escaped(tmp_path: Path) -> None:
    evil = '<script>alert("x")</script>'
    tl = Timeline({"r1"})
    tl.feed(
        {
            "type": "cache_stats",
            "ts": T0,
            "cache_domain": evil,
            "role": "prefill",
            "capacity_tokens": 10,
            "used_tokens": 5,
        }
    )
    tl.feed(
        {
            "type": "request",
            "ts": T0 + 1,
            "request_id": "r1",
            "tenant_id": evil,
            "prompt_tokens": 50,
            "cache_domain": evil,
        }
    )
    report = build_report([alert("r1", evil, "<img src=x onerror=alert(1)>", cache_domain=evil)], tl)
    html = render(report, title="<b>t</b>", inputs=["a.jsonl"], problems=Problems())
    assert evil not in html and "<img src=x" not in html and "<b>t</b>" not in html
    assert "&lt;script&gt;" in html
    assert html.count("<script>") == 1  # ours: the enhancement


def test_unreadable_lines_are_counted_and_shown(tmp_path: Path) -> None:
    alerts = tmp_path / "alerts.jsonl"
    good = alert("r1", "victim", "origin").model_dump_json()
    alerts.write_text(f'{good}\nnot json\n{{"alert_id": 1}}\n\n')
    events = tmp_path / "events.jsonl"
    events.write_bytes(
        orjson.dumps(
            {
                "type": "request",
                "ts": T0,
                "request_id": "r1",
                "tenant_id": "victim",
                "prompt_tokens": 5,
                "cache_domain": "pd-1",
            }
        )
        + b'\n[1, 2]\n{"type": "request"}\n{"type": "mystery", "ts": 1}\n'
    )
    problems = Problems()
    assert [a.alert_id for a in read_alert_files([str(alerts)], problems)] == ["a-r1"]
    tl = Timeline({"r1"})
    read_events([str(events)], tl, problems)
    assert problems.counts == {"not_json": 1, "invalid_alert": 1, "invalid_event": 2, "missing_field": 1}
    assert any(e.startswith(f"{alerts}:2: not_json") for e in problems.examples)
    # Through the command: the page says what it could not read.
    p = argparse.ArgumentParser()
    add_arguments(p)
    out = tmp_path / "r.html"
    assert (
        run(p.parse_args(["--alerts", str(alerts), "--events", str(events), "--out", str(out), "--no-progress"])) == 0
    )
    html = out.read_text()
    assert "5 input lines could not be read" in html and 'data-request-id="r1"' in html


def _lead(rid: str, tenant: str, source: str | None, ts: float = T0 + 40, severity: str = "info") -> Lead:
    finding = Signal(name="cross_tenant_contamination", severity=severity, score=0.5, source_tenant_id=source,  # type: ignore[arg-type]
                     figures={"matched_fingerprints": 2, "longest_run": 2, "required_run": 3, "warm": True,
                              "source_request_ids": [f"src-of-{rid}"]})  # fmt: skip
    return Lead(ts=ts, cache_domain="pd-1", tenant_id=tenant, request_id=rid, findings=[finding])


def test_leads_below_an_alert_about_the_alerts_tenants_join_the_leads_and_nothing_else(tmp_path: Path) -> None:
    """ADR 0035: a replay's leads are for the investigation: those naming a tenant the alerts name are listed with the
    warnings, never as affected, never notified; the others, and responses an alert names already, are left out."""
    below = [
        _lead("b1", "reader", "origin"),  # names the alerts' source: listed
        _lead("b2", "victim", "stranger"),  # received by the alerts' receiver: listed
        _lead("b3", "elsewhere", "stranger"),  # about nobody the alerts name: left out
        _lead("r1", "victim", "origin"),  # an alert names it already
    ]
    report = build_report([alert("r1", "victim", "origin")], None, below)
    assert [r.request_id for r in report.affected] == ["r1"]
    assert [(r.request_id, r.severity, r.source_tenants) for r in report.leads] == [
        ("b1", "info", ["origin"]),
        ("b2", "info", ["stranger"]),
    ]
    assert report.leads[0].source_request_ids == ["src-of-b1"] and report.leads[0].evidence
    assert {v.tenant_id for v in report.tenants} == {"victim", "origin"}  # nobody is notified of a lead
    # Through the command: --leads reads a replay's leads file; a line that is no lead is a problem shown, not a crash.
    alerts, leads, out = tmp_path / "alerts.jsonl", tmp_path / "leads.jsonl", tmp_path / "r.html"
    alerts.write_text(alert("r1", "victim", "origin").model_dump_json() + "\n")
    leads.write_text("".join(x.model_dump_json() + "\n" for x in below) + "not json\n")
    p = argparse.ArgumentParser()
    add_arguments(p)
    assert run(p.parse_args(["--alerts", str(alerts), "--leads", str(leads), "--out", str(out), "--no-progress"])) == 0
    html = out.read_text()
    assert 'data-request-id="b1"' in html and 'data-request-id="b2"' in html and 'data-request-id="b3"' not in html
    assert "not_json" in html
