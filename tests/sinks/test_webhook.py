"""Webhook rules without the network: signatures, grouping, alertmanager timing, routing and scoping, body formats."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from webhook_helpers import (
    SECRET,
    T0,
    make_alert,
    rx,
    settings_for,
)

from streams.settings import WebhookReceiver
from streams.sinks.formats import Notification, render_body, routes_to, scope_for_receiver
from streams.sinks.webhook import Grouper, sign, verify_signature

# --------------------------------------------------------------------------- signing


def test_signature_roundtrip_and_replay_window() -> None:
    body = b'{"a":1}'
    sig = sign(SECRET, 1000, body)
    assert sig.startswith("v1=") and len(sig) == 3 + 64
    assert verify_signature(SECRET, "1000", body, sig, tolerance_s=300, now=1100)
    assert not verify_signature(SECRET, "1000", body + b" ", sig, tolerance_s=300, now=1100)
    assert not verify_signature("other", "1000", body, sig, tolerance_s=300, now=1100)
    # A captured request replayed later than the tolerance is refused even with a valid MAC.
    assert not verify_signature(SECRET, "1000", body, sig, tolerance_s=300, now=1301)
    assert not verify_signature(SECRET, "999", body, sig, tolerance_s=300, now=1000)
    assert not verify_signature(SECRET, "nope", body, sig)
    assert verify_signature(SECRET, 1000, body, f"v1=deadbeef, {sig}", now=1000)  # secret rotation


@pytest.mark.parametrize("ts", ["+1000", "01000", "1_000", " 1000", "1000 ", "1000.0", "１０００", "-1000", "", True])
def test_verify_accepts_only_a_plain_decimal_timestamp(ts: Any) -> None:
    body = b'{"a":1}'
    # A valid signature over "1000." must not also be valid under other spellings of the same number.
    sig = sign(SECRET, "1000", body)
    assert verify_signature(SECRET, "1000", body, sig, now=1000)
    assert verify_signature(SECRET, ts, body, sig, now=1000) is False
    assert verify_signature(SECRET, ts, body, sign(SECRET, str(ts), body), now=1000) is False


@pytest.mark.parametrize(
    "ts, sig",
    [
        ("1000", "v1=ä"),
        ("1000", "v1=\u00e9" + "0" * 63),
        ("1000", "v1=\ud83d\ude00"),
        ("10é0", "v1=00"),
        ("1000", None),
    ],
)
def test_verify_never_raises_on_hostile_headers(ts: str, sig: Any) -> None:
    assert verify_signature(SECRET, ts, b"{}", sig, now=1000) is False


# --------------------------------------------------------------------------- pure grouping


def test_grouper_waits_then_batches_per_interval() -> None:
    g = Grouper("r", group_wait_s=2.0, group_interval_s=10.0)
    for i in range(5):
        assert g.add(make_alert(i), now=100.0 + i * 0.1) == "new"
    assert g.due(101.9) == []
    [n] = g.due(102.0)
    assert n.status == "firing" and len(n.alerts) == 5
    assert n.request_ids == [f"req-g1-{i}" for i in range(5)]
    # Redelivered alerts are duplicates, not new notifications.
    assert g.add(make_alert(3), now=103.0) == "sent"
    g.add(make_alert(5), now=103.0)
    g.add(make_alert(6), now=104.0)
    assert g.add(make_alert(6), now=104.0) == "pending"
    assert g.due(111.9) == []
    [n2] = g.due(112.0)
    assert n2.alert_ids == ["al-g1-5", "al-g1-6"]
    assert n2.notification_id != n.notification_id


def test_grouper_resolves_only_when_the_core_says_so() -> None:
    g = Grouper("r", group_wait_s=0.0, group_interval_s=0.0)
    g.add(make_alert(0), now=0.0)
    g.add(make_alert(1, group="g2"), now=0.0)
    assert [n.status for n in g.due(0.0)] == ["firing", "firing"]
    # No clock of its own: hours of quiet resolve nothing, nor does closing.
    assert g.due(1e6) == [] and g.flush(1e6) == []
    [res] = g.resolve("inc-g1", T0 + 60.0, now=1e6)
    assert res.status == "resolved" and res.alert_ids == ["al-g1-0"] and res.ends_at == T0 + 60.0
    assert g.resolve("inc-g1", T0 + 60.0, now=1e6) == []  # once
    assert g.resolve("inc-unknown", T0, now=1e6) == []  # never routed here: nothing to say
    assert g.open_incidents == 1 and g.knows("inc-g2")


def test_grouper_never_resolves_unannounced_alerts() -> None:
    g = Grouper("r", group_wait_s=100.0, group_interval_s=100.0)
    g.add(make_alert(0), now=0.0)
    notes = g.resolve("inc-g1", T0 + 10, now=1.0)
    assert [n.status for n in notes] == ["firing", "resolved"]


def test_grouper_resolution_before_some_alerts_leaves_nothing_firing() -> None:
    # On the Kafka alerts topic an incident's alerts and its resolution sit on different partitions.
    g = Grouper("r", group_wait_s=30.0, group_interval_s=30.0, resend_interval_s=60.0)
    g.add(make_alert(0), now=0.0)
    first = g.resolve("inc-g1", T0 + 61, now=1.0)
    assert [n.status for n in first] == ["firing", "resolved"]
    # A late alert of the resolved incident: announced and resolved at once, not after group_wait.
    assert g.add(make_alert(1), now=2.0) == "new"
    assert g.next_due() is not None and g.next_due() <= 2.0
    late = g.due(2.0)
    assert [(n.status, n.alert_ids) for n in late] == [("firing", ["al-g1-1"]), ("resolved", ["al-g1-1"])]
    assert late[1].ends_at == T0 + 61
    # A resolution that comes before every alert of its incident works the same way.
    g.resolve("inc-g2", T0 + 99, now=3.0)
    g.add(make_alert(2, group="g2"), now=4.0)
    assert [n.status for n in g.due(4.0)] == ["firing", "resolved"]
    assert g.open_incidents == 0 and g.due(1e9) == [] and g.next_due() is None


def test_grouper_resends_active_alerts_until_resolved() -> None:
    g = Grouper("am", group_wait_s=0.0, group_interval_s=0.0, resend_interval_s=60.0)
    g.add(make_alert(0), now=0.0)
    [first] = g.due(0.0)
    assert g.next_due() == 60.0
    assert g.due(59.0) == []
    [again] = g.due(60.0)
    assert again.status == "firing" and again.alert_ids == first.alert_ids and again.resend == 1
    assert again.notification_id != first.notification_id  # a receiver deduping on ids must not drop it
    g.add(make_alert(1), now=61.0)
    [batch] = g.due(61.0)  # group_interval 0: the new alert goes at once, alone
    assert batch.alert_ids == ["al-g1-1"] and batch.resend == 0
    [third] = g.due(121.0)
    assert third.alert_ids == ["al-g1-0", "al-g1-1"] and third.resend == 2
    [res] = g.resolve("inc-g1", T0 + 61, now=130.0)
    assert res.status == "resolved"
    assert g.due(1e9) == [] and g.next_due() is None
    # A resolution that never comes cannot keep an alert asserted for ever: re-sends stop after resend_for_s.
    capped = Grouper("am", group_wait_s=0.0, group_interval_s=0.0, resend_interval_s=60.0, resend_for_s=150.0)
    capped.add(make_alert(0), now=0.0)
    capped.due(0.0)
    assert [n.resend for n in capped.due(60.0) + capped.due(120.0)] == [1, 2]
    assert capped.due(180.0) == [] and capped.next_due() is None  # 180 s after its last alert > 150 s
    # Receivers of other formats are not re-sent to.
    plain = Grouper("json", group_wait_s=0.0, group_interval_s=0.0)
    plain.add(make_alert(0), now=0.0)
    plain.due(0.0)
    assert plain.next_due() is None and plain.due(1e9) == []


def test_alertmanager_body_carries_ends_at_in_the_future_while_firing() -> None:
    from streams.sinks.webhook import make_envelope

    s = settings_for(Path("/nonexistent"), [], resend_interval_s=30.0, ends_at_intervals=4)
    am = rx("am", "http://x", format="alertmanager")
    n = Notification(receiver="am", group_key="g", status="firing", alerts=[make_alert(0)])
    [item] = orjson.loads(make_envelope(n, am, s, wall_now=T0 + 1000).body)
    assert item["endsAt"] == "2026-05-28T20:45:20.000Z"  # T0 + 1000 + 4 x 30
    resolved = Notification(receiver="am", group_key="g", status="resolved", alerts=[make_alert(0)], ends_at=T0 + 60)
    [item] = orjson.loads(make_envelope(resolved, am, s, wall_now=T0 + 1000).body)
    assert item["endsAt"] == "2026-05-28T20:27:40.000Z"  # the core's resolution time


def test_routing_and_tenant_scoping() -> None:
    a = make_alert(0)
    assert routes_to(a, rx("all", "http://x"))
    assert not routes_to(a, WebhookReceiver(name="r", url="http://x", kinds=["canary_leak"]))
    assert not routes_to(a, WebhookReceiver(name="r", url="http://x", cache_domains=["pool-9"]))
    assert not routes_to(make_alert(0, severity="warning"), WebhookReceiver(name="r", url="http://x"))
    assert not routes_to(a, rx("b", "http://x", tenants=["tenant-b"]))
    assert not routes_to(make_alert(0, tenant=None), rx("a", "http://x", tenants=["tenant-a"]))  # type: ignore[arg-type]
    scoped = scope_for_receiver(a, rx("a", "http://x", tenants=["tenant-a"]))
    assert scoped.alert_id == a.alert_id
    assert "tenant-b" not in orjson.dumps(scoped.model_dump(mode="json")).decode()


def test_render_formats_shapes() -> None:
    n = Notification(receiver="r", group_key="k", status="firing", alerts=[make_alert(0), make_alert(1)])
    body = orjson.loads(render_body(n, "alertmanager"))
    assert isinstance(body, list) and len(body) == 2
    assert body[0]["labels"]["alertname"] == "cross_tenant_contamination"
    assert all(isinstance(v, str) for item in body for v in [*item["labels"].values(), *item["annotations"].values()])
    assert "endsAt" not in body[0]


def test_notifications_carry_the_incidents_severity_to_page_on() -> None:
    """The alert's severity is the scope; the incident's (ADR 0018) is what pages: the newest alert of each incident
    says it, alerts from before it existed count with their own."""
    first = make_alert(0, incident="i1").model_copy(update={"incident_severity": "warning"})
    second = make_alert(1, incident="i1").model_copy(update={"incident_severity": "critical"})
    lone = make_alert(2, incident="i2").model_copy(update={"incident_severity": "warning"})
    assert Notification("r", "k", "firing", [first]).incident_severity == "warning"
    assert Notification("r", "k", "firing", [second, first]).incident_severity == "critical"
    assert Notification("r", "k", "firing", [first, lone]).incident_severity == "warning"
    assert Notification("r", "k", "firing", [make_alert(3, severity="high")]).incident_severity == "high"
    body = orjson.loads(render_body(Notification("r", "k", "firing", [first, second]), "json"))
    assert (body["severity"], body["incident_severity"]) == ("critical", "critical")
    am = orjson.loads(render_body(Notification("r", "k", "firing", [first]), "alertmanager"))
    assert am[0]["labels"]["incident_severity"] == "warning"
