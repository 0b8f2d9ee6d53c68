"""Where missed leaks went (streams/sim/misses.py): each missed leak gets the reason of the rule that held its
strongest content finding below high, and the reasons add up to the leaks missed."""

from __future__ import annotations

from typing import Any

import pytest
from factories import TEXTS, request, response

from detectors.monitor import Monitor
from detectors.settings import DetectionSettings
from schemas.alert import Alert, Lead, Signal
from streams.sim.misses import REASONS, ext_shapes, miss_counts, misses_table, reason, row_shapes, shape_counts
from tests.support.live import observe_now


def _alert(rid: str, severity: str, name: str = "cross_tenant_contamination", **figures: Any) -> Alert:
    sig = Signal(name=name, severity=severity, score=0.5, figures=figures)  # type: ignore[arg-type]
    return Alert(alert_id=f"a-{rid}-{severity}", ts=1.0, kind=name, severity=severity, cache_domain="d",  # type: ignore[arg-type]
                 request_ids=[rid], score=0.5, evidence=[sig], summary="s", group_key="g", incident_id="i")  # fmt: skip


PAGE = {"warm": True, "evidence": 9.0, "passages": 1, "long_passages": 1, "attached_runs": 0, "matched_fingerprints": 9}


@pytest.mark.parametrize(
    ("figures", "expected"),
    [
        ({**PAGE, "whole_sentences": True}, "echo"),
        ({**PAGE, "pool_turnovers": 40.0}, "beyond_pools"),
        ({**PAGE, "evidence": 1.0}, "shared"),
        ({**PAGE, "passages": 6}, "scattered"),
        (PAGE, "weak"),
        # The order is the rules' own: an echo of shared text is an echo.
        ({**PAGE, "whole_sentences": True, "evidence": 1.0}, "echo"),
    ],
)
def test_a_findings_figures_name_the_rule_that_held_it_below_high(figures: dict[str, Any], expected: str) -> None:
    assert reason([_alert("r", "warning", **figures)]) == expected


def test_the_strongest_finding_decides_and_no_finding_is_nothing_or_other() -> None:
    weak, echo = _alert("r", "info", **PAGE), _alert("r", "warning", **PAGE, whole_sentences=True)
    assert reason([weak, echo]) == "echo"
    assert reason([]) == "nothing"
    assert reason([_alert("r", "warning", name="impossible_prefill")]) == "other"


def test_an_info_finding_raises_no_alert_so_its_leak_counts_as_nothing() -> None:
    # The detector's own info finding, a tenant's text in its other session (ADR 0025), is no alert: it is among
    # `nothing`; next to an alert raised for another reason it is `cross_session`.
    m = Monitor(DetectionSettings(overlap_warmup_docs=0, overlap_warmup_s=0))
    alerts = []
    for ev in (
        request("a1", "alice", 1, text=TEXTS[1], session_id="s-old"),
        response("a1", "alice", 2, text="ok", session_id="s-old"),
        request("a2", "alice", 5, session_id="s-new"),
        response("a2", "alice", 6, text=TEXTS[1], session_id="s-new"),
    ):
        alerts += observe_now(m, ev)
    assert miss_counts(alerts, ["a2"])["miss:nothing"] == 1
    assert reason([_alert("a2", "warning", name="cross_session_contamination", **PAGE)]) == "cross_session"
    # With the core's leads kept, the same miss has its reason, and a leak with no finding at all stays `nothing`.
    m = Monitor(DetectionSettings(overlap_warmup_docs=0, overlap_warmup_s=0))
    m.record_leads()
    alerts = [a for ev in (
        request("a1", "alice", 1, text=TEXTS[1], session_id="s-old"),
        response("a1", "alice", 2, text="ok", session_id="s-old"),
        request("a2", "alice", 5, session_id="s-new"),
        response("a2", "alice", 6, text=TEXTS[1], session_id="s-new"),
    ) for a in observe_now(m, ev)]  # fmt: skip
    counts = miss_counts(alerts, ["a2", "a1"], m.take_leads())
    assert counts["miss:lead:cross_session"] == 1 and counts["miss:nothing"] == 1


def _lead(rid: str, **figures: Any) -> Lead:
    sig = Signal(name="cross_tenant_contamination", severity="info", score=0.5, figures=figures)
    return Lead(ts=1.0, cache_domain="d", request_id=rid, findings=[sig])


@pytest.mark.parametrize(
    ("figures", "expected"),
    [
        ({**PAGE, "warm": False}, "lead:cold"),  # a cold domain's finding below high: never held
        ({**PAGE, "held_s": 600.0}, "lead:cold"),  # held, and dismissed when judged again
        ({**PAGE, "passages": 6}, "lead:scattered"),
        ({**PAGE, "longest_run": 2, "required_run": 3}, "lead:weak"),
    ],
)
def test_a_leads_figures_name_the_rule_that_kept_it_below_an_alert(figures: dict[str, Any], expected: str) -> None:
    assert reason([], [_lead("r", **figures)]) == expected
    assert reason([], []) == "nothing" and reason([]) == "nothing"
    other = Lead(
        ts=1.0, cache_domain="d", request_id="r", findings=[Signal(name="foreign_cache_read", severity="info", score=0)]
    )
    assert reason([], [other]) == "lead:other"


def test_flagged_leaks_are_not_missed_and_the_counts_add_up() -> None:
    alerts = [_alert("hit", "high", **PAGE), _alert("echo", "warning", **PAGE, whole_sentences=True)]
    counts = miss_counts(alerts, ["hit", "echo", "silent"])
    assert set(counts) == {f"miss:{k}" for k in REASONS}
    assert sum(counts.values()) == 2 and counts["miss:echo"] == counts["miss:nothing"] == 1
    runs = [{"profile": "p", "f": counts}, {"profile": "p", "f": {"miss:nothing": 2}}]
    table = "\n".join(misses_table(runs))
    assert (
        "| no alert names it (nor a lead, where kept) | 75.0 % (3) |" in table
        and "| whole sentences of the source (echo warning) | 25.0 % (1) |" in table
    )


def test_a_missed_leaks_label_says_its_kind_and_its_shortest_passage_against_a_page() -> None:
    rows = [
        {"request_id": "a", "contaminated": True, "leak_kind": "cross_tenant", "shortest_passage_tokens": 9},
        {"request_id": "b", "contaminated": True, "leak_kind": "cross_tenant", "shortest_passage_tokens": 40},
        {"request_id": "c", "contaminated": True, "leak_kind": "cross_tenant", "shortest_passage_tokens": 300},
        {"request_id": "d", "contaminated": True, "leak_kind": "cross_session", "shortest_passage_tokens": 300},
        {"request_id": "e", "contaminated": True},
        {"request_id": "clean", "contaminated": False},
    ]
    shapes = row_shapes(rows)
    assert shapes == {"a": "cross_tenant:short", "b": "cross_tenant:page", "c": "cross_tenant:long",
                      "d": "cross_session:any", "e": "cross_tenant:unknown"}  # fmt: skip
    # ext-v2's labels: a leak's shortest passage decides.
    ext = {"positives": {"x": "t1"}, "leaks": {"x": [{"tokens": 75}, {"tokens": 12}]}}
    assert ext_shapes(ext) == {"x": "cross_tenant:short"}
    counts = shape_counts([_alert("c", "critical", **PAGE)], shapes)
    assert counts["missed:cross_tenant:long"] == 0 and sum(counts.values()) == 4
