"""Webhooks against a real HTTP receiver on loopback: formats, signatures, retries, dead letters, the outbox
across restarts, resolutions, tenant scoping."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from conftest import wait_for
from webhook_helpers import (
    T0,
    Receiver,
    exchange_at,
    free_port,
    make_alert,
    resolution,
    rx,
    settings_for,
)

from schemas.timefmt import parse_ts
from streams.settings import WebhookSettings
from streams.sinks.webhook import DeadLetterStore, WebhookSink


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.stop()


def test_unsigned_deliveries_are_warned_about(
    tmp_path: Path, receiver: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    s = settings_for(
        tmp_path, [rx("plain", receiver.url("/p")), rx("own", receiver.url("/o"), secret="x")], secret=None
    )
    with caplog.at_level("WARNING"):
        sink = WebhookSink(s)
        sink.on_alert(make_alert(0))
        sink.close()
    [warning] = [r.getMessage() for r in caplog.records if "UNSIGNED" in r.getMessage()]
    assert "plain" in warning and "own" not in warning
    assert "X-Crosstalk-Signature" not in receiver.delivered("/p")[0]["headers"]
    assert "X-Crosstalk-Signature" in receiver.delivered("/o")[0]["headers"]


# --------------------------------------------------------------------------- sink against the real receiver


def test_three_formats_signed_and_shaped(tmp_path: Path, receiver: Receiver) -> None:
    s = settings_for(
        tmp_path,
        [
            rx("j", receiver.url("/json"), format="json", headers={"X-Team": "sre"}),
            rx("am", receiver.url("/am"), format="alertmanager"),
            rx("sl", receiver.url("/slack"), format="slack"),
        ],
    )
    sink = WebhookSink(s)
    alert = make_alert(0)
    sink.on_exchange(exchange_at(alert.ts), [alert])
    sink.on_alert(alert)  # the runner may call both; one notification per receiver
    wait_for(lambda: len(receiver.delivered()) == 3)
    sink.close()
    assert len(receiver.all()) == 3
    assert all(r["verified"] for r in receiver.all())

    [j] = receiver.delivered("/json")
    assert j["headers"]["X-Team"] == "sre"
    assert j["headers"]["X-Crosstalk-Alert-Ids"] == alert.alert_id
    assert j["headers"]["Idempotency-Key"] == j["body"]["notification_id"]
    assert j["body"]["status"] == "firing"
    assert j["body"]["alerts"] == [alert.model_dump(mode="json")]
    assert j["body"]["request_ids"] == alert.request_ids

    [am] = receiver.delivered("/am")
    [item] = am["body"]
    assert set(item) == {"labels", "annotations", "startsAt", "endsAt", "generatorURL"}
    # Firing: endsAt a few re-send intervals ahead of now (wall clock), so Alertmanager keeps it active.
    assert parse_ts(item["endsAt"]) > time.time() + 3 * WebhookSettings().resend_interval_s
    assert item["labels"]["alertname"] == alert.kind
    assert item["labels"]["alert_id"] == alert.alert_id
    assert item["labels"]["tenant_id"] == "tenant-a" and item["labels"]["cache_domain"] == "pool-1"
    assert item["annotations"]["request_ids"] == "req-g1-0"
    assert item["startsAt"].endswith("Z")

    [sl] = receiver.delivered("/slack")
    assert "cross_tenant_contamination" in sl["body"]["text"]
    assert sl["body"]["blocks"][0]["type"] == "header"
    assert any("req-g1-0" in orjson.dumps(b).decode() for b in sl["body"]["blocks"])


def test_retries_after_500_then_delivers_once_more_with_same_ids(tmp_path: Path, receiver: Receiver) -> None:
    receiver.script["/hook"] = [500, 500]
    sink = WebhookSink(settings_for(tmp_path, [rx("r", receiver.url("/hook"))]))
    sink.on_alert(make_alert(0))
    wait_for(lambda: len(receiver.delivered()) == 1)
    sink.close()
    reqs = receiver.all()
    assert [r["code"] for r in reqs] == [500, 500, 200]
    assert {r["headers"]["X-Crosstalk-Alert-Ids"] for r in reqs} == {"al-g1-0"}
    assert len({r["headers"]["Idempotency-Key"] for r in reqs}) == 1
    assert sink.stats.delivered == 1 and sink.stats.retries == 2 and sink.stats.deadlettered == 0
    assert DeadLetterStore(tmp_path / "deadletter.jsonl").read() == []


def test_429_is_retried(tmp_path: Path, receiver: Receiver) -> None:
    receiver.script["/hook"] = [429]
    sink = WebhookSink(settings_for(tmp_path, [rx("r", receiver.url("/hook"))]))
    sink.on_alert(make_alert(0))
    wait_for(lambda: len(receiver.delivered()) == 1)
    sink.close()
    assert [r["code"] for r in receiver.all()] == [429, 200]


def test_400_is_not_retried_and_goes_to_dead_letter(tmp_path: Path, receiver: Receiver) -> None:
    receiver.script["/hook"] = [400, 400, 400]
    sink = WebhookSink(settings_for(tmp_path, [rx("r", receiver.url("/hook"))]))
    sink.on_alert(make_alert(0))
    sink.close()
    assert [r["code"] for r in receiver.all()] == [400]
    [dl] = DeadLetterStore(tmp_path / "deadletter.jsonl").read()
    assert dl["reason"] == "http_400" and dl["alert_ids"] == ["al-g1-0"] and dl["receiver"] == "r"
    assert sink.stats.deadlettered == 1


def test_exhausted_retries_go_to_dead_letter(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}/hook"  # nothing listens there
    sink = WebhookSink(settings_for(tmp_path, [rx("r", url)], max_retries=2))
    sink.on_alert(make_alert(0))
    sink.close()
    [dl] = DeadLetterStore(tmp_path / "deadletter.jsonl").read()
    assert dl["reason"].startswith("retries exhausted: transport_error") and dl["attempts"] == 3
    # Dead-lettered is final: a restart does not send it again.
    assert WebhookSink(settings_for(tmp_path, [rx("r", url)])).outbox.load().unacked == []


def test_receiver_down_then_back_nothing_lost(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/hook"
    s = settings_for(tmp_path, [rx("r", url)], max_retries=10_000, group_wait_s=0.0)
    sink = WebhookSink(s)
    alerts = [make_alert(i, group=f"g{i}") for i in range(3)]
    for a in alerts:
        sink.on_alert(a)
    wait_for(lambda: sink.stats.failures >= 3)
    sink.close(timeout=0.2)  # receiver still down: leftovers stay in the outbox
    assert sink.stats.delivered == 0 and sink.stats.deadlettered == 0

    rcv = Receiver(port=port)
    try:
        sink2 = WebhookSink(s)
        wait_for(lambda: len(rcv.delivered()) == 3)
        sink2.close()
        got = sorted(r["headers"]["X-Crosstalk-Alert-Ids"] for r in rcv.delivered())
        assert got == sorted(a.alert_id for a in alerts)
        assert all(r["verified"] for r in rcv.all())
        assert DeadLetterStore(tmp_path / "deadletter.jsonl").read() == []
        # Third start: everything was acknowledged, nothing is sent again.
        sink3 = WebhookSink(s)
        sink3.close()
        assert len(rcv.all()) == 3
    finally:
        rcv.stop()


def test_crash_while_grouping_resends_after_restart(tmp_path: Path, receiver: Receiver) -> None:
    s = settings_for(tmp_path, [rx("r", receiver.url("/hook"))], group_wait_s=3600.0)
    sink = WebhookSink(s)
    for i in range(2):
        sink.on_alert(make_alert(i))
    sink.close(drain=False)  # like a crash: no flush, nothing sent
    assert receiver.all() == []
    sink2 = WebhookSink(s)
    sink2.close()  # drains: group flushed now
    [n] = receiver.delivered()
    assert n["body"]["alert_ids"] == ["al-g1-0", "al-g1-1"]


def test_five_alerts_of_one_group_make_one_notification(tmp_path: Path, receiver: Receiver) -> None:
    s = settings_for(tmp_path, [rx("r", receiver.url("/hook"))], group_wait_s=3600.0, group_interval_s=3600.0)
    sink = WebhookSink(s)
    for i in range(5):
        sink.on_alert(make_alert(i))
    sink.on_alert(make_alert(0, group="other"))
    sink.close()  # group_wait is an hour: close flushes each group as one notification
    bodies = {r["body"]["group_key"]: r["body"] for r in receiver.delivered()}
    assert len(receiver.all()) == 2
    g1 = bodies["pool-1/cross_tenant_contamination/g1"]
    assert g1["request_ids"] == [f"req-g1-{i}" for i in range(5)]
    assert g1["alert_ids"] == [f"al-g1-{i}" for i in range(5)]


def test_resolved_notification_when_the_core_resolves(tmp_path: Path, receiver: Receiver) -> None:
    s = settings_for(tmp_path, [rx("am", receiver.url("/am"), format="alertmanager")])
    sink = WebhookSink(s)
    sink.on_alert(make_alert(0))
    sink.on_alert(make_alert(1))
    wait_for(lambda: len(receiver.delivered()) >= 1)
    sink.on_exchange(exchange_at(T0 + 3600), [])  # event time alone resolves nothing: not the sink's call
    sink.on_resolved(resolution())  # the core: quiet for 60 s after the last alert
    wait_for(lambda: any(r["headers"]["X-Crosstalk-Status"] == "resolved" for r in receiver.delivered()))
    sink.close()
    resolved = [r for r in receiver.delivered() if r["headers"]["X-Crosstalk-Status"] == "resolved"]
    [res] = resolved
    assert res["headers"]["X-Crosstalk-Status"] == "resolved"
    assert sorted(i["labels"]["alert_id"] for i in res["body"]) == ["al-g1-0", "al-g1-1"]
    assert res["body"][0]["endsAt"] == "2026-05-28T20:27:41.000Z"  # T0 + 1 + 60
    firing_ids = sorted(i["labels"]["alert_id"] for r in receiver.delivered() if r is not res for i in r["body"])
    assert firing_ids == ["al-g1-0", "al-g1-1"]


def test_close_does_not_resolve_open_incidents(tmp_path: Path, receiver: Receiver) -> None:
    s = settings_for(tmp_path, [rx("j", receiver.url("/j"))])
    sink = WebhookSink(s)
    sink.on_alert(make_alert(0))
    sink.close()
    assert [r["body"]["status"] for r in receiver.delivered()] == ["firing"]
    # Still open: the next start remembers it, and resolves it when the core does.
    sink = WebhookSink(s)
    sink.on_resolved(resolution())
    sink.close()
    assert [r["body"]["status"] for r in receiver.delivered()] == ["firing", "resolved"]
    assert (tmp_path / "outbox" / "journal.jsonl").read_bytes() == b""  # all done: compacted away


def test_journaled_resolution_is_announced_after_a_crash(tmp_path: Path, receiver: Receiver) -> None:
    s = settings_for(tmp_path, [rx("j", receiver.url("/j"))])
    sink = WebhookSink(s)
    sink.on_alert(make_alert(0))
    wait_for(lambda: len(receiver.delivered()) == 1)
    sink.outbox.append_resolution(resolution())  # journaled, then the process dies before the worker sees it
    sink.close(drain=False)
    sink = WebhookSink(s)
    sink.close()
    assert [r["body"]["status"] for r in receiver.delivered()] == ["firing", "resolved"]


def test_tenant_scoped_receiver_privacy(tmp_path: Path, receiver: Receiver) -> None:
    s = settings_for(
        tmp_path,
        [
            rx("ops", receiver.url("/ops")),
            rx("a", receiver.url("/a"), tenants=["tenant-a"]),
            rx("a-slack", receiver.url("/a-slack"), tenants=["tenant-a"], format="slack"),
            rx("a-am", receiver.url("/a-am"), tenants=["tenant-a"], format="alertmanager"),
        ],
    )
    sink = WebhookSink(s)
    sink.on_alert(make_alert(0, tenant="tenant-a", source="tenant-b"))
    sink.on_alert(make_alert(1, group="g2", tenant="tenant-b", source="tenant-a"))
    sink.on_alert(make_alert(2, group="g3", tenant=None, source=None, kind="capacity_gap"))  # type: ignore[arg-type]
    sink.close()
    assert len(receiver.delivered("/ops")) == 3
    for path in ("/a", "/a-slack", "/a-am"):
        [only] = receiver.delivered(path)
        raw = orjson.dumps(only["body"]).decode()
        assert "al-g1-0" in raw
        assert "tenant-b" not in raw and "src-req-1" not in raw and "source_session_id" not in raw
    scoped = receiver.delivered("/a")[0]["body"]["alerts"][0]
    assert (
        scoped["summary"]
        == "response to tenant tenant-a on pool-1 carries 42 passages of another tenant's recent context"
    )
    assert scoped["source_tenant_id"] is None
    ev = scoped["evidence"][0]
    assert ev["figures"] == {"shared_words": 42} and ev["source_tenant_id"] is None
    ops = orjson.dumps(receiver.delivered("/ops")).decode()
    assert "src-req-1" in ops  # the operator still sees the full evidence
