"""Webhooks against a real HTTP receiver on loopback: formats, signatures, retries, outbox, grouping."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import orjson
import pytest

from schemas.alert import Alert, IncidentResolved, Signal
from schemas.exchange import Exchange
from schemas.timefmt import parse_ts
from streams.settings import WebhookReceiver, WebhookSettings
from streams.sinks.formats import Notification, render_body, routes_to, scope_for_receiver
from streams.sinks.webhook import DeadLetterStore, Grouper, WebhookSink, sign, verify_signature

SECRET = "s3cret"
T0 = 1_780_000_000.0


# --------------------------------------------------------------------------- a real receiver


class Receiver:
    """Threaded HTTP server on 127.0.0.1 that checks signatures and records every request."""

    def __init__(self, port: int = 0) -> None:
        self.requests: list[dict[str, Any]] = []
        self.script: dict[str, list[int]] = {}  # path -> status codes to answer before 200
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                ts = self.headers.get("X-Crosstalk-Timestamp", "")
                sig = self.headers.get("X-Crosstalk-Signature", "")
                with outer.lock:
                    codes = outer.script.get(self.path, [])
                    code = codes.pop(0) if codes else 200
                    outer.requests.append(
                        {
                            "path": self.path,
                            "headers": dict(self.headers),
                            "body": orjson.loads(body),
                            "verified": verify_signature(SECRET, ts, body, sig, tolerance_s=300),
                            "code": code,
                        }
                    )
                self.send_response(code)
                if code == 429:
                    self.send_header("Retry-After", "0")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def delivered(self, path: str | None = None) -> list[dict[str, Any]]:
        with self.lock:
            return [r for r in self.requests if r["code"] < 300 and (path is None or r["path"] == path)]

    def all(self, path: str | None = None) -> list[dict[str, Any]]:
        with self.lock:
            return [r for r in self.requests if path is None or r["path"] == path]

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.stop()


def wait_for(cond: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.01)
    raise AssertionError("condition not met in time")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --------------------------------------------------------------------------- fixtures


def make_alert(
    i: int,
    *,
    group: str = "g1",
    incident: str | None = None,
    tenant: str = "tenant-a",
    source: str | None = "tenant-b",
    severity: str = "critical",
    kind: str = "cross_tenant_contamination",
    domain: str = "pool-1",
    ts: float | None = None,
) -> Alert:
    return Alert(
        alert_id=f"al-{group}-{i}",
        ts=T0 + i if ts is None else ts,
        kind=kind,  # type: ignore[arg-type]
        severity=severity,  # type: ignore[arg-type]
        cache_domain=domain,
        tenant_id=tenant,
        source_tenant_id=source,
        session_id=f"sess-{i}",
        request_ids=[f"req-{group}-{i}"],
        score=0.9,
        evidence=[
            Signal(
                name="content_overlap",
                severity="critical",
                score=0.9,
                figures={"shared_words": 42, "source_request_ids": ["src-req-1"], "source_session_id": "sx"},
                source_tenant_id=source,
            )
        ],
        summary=f"response to tenant {tenant} on {domain} carries 42 passages of tenant {source}'s recent context",
        group_key=f"{domain}/{kind}/{group}",
        incident_id=incident or f"inc-{group}",
        traceparent="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    )


def settings_for(tmp_path: Path, receivers: list[WebhookReceiver], **kw: Any) -> WebhookSettings:
    base: dict[str, Any] = {
        "receivers": receivers,
        "secret": SECRET,
        "timeout_s": 2.0,
        "max_retries": 3,
        "backoff_initial_s": 0.01,
        "backoff_max_s": 0.02,
        "group_wait_s": 0.0,
        "group_interval_s": 0.0,
        "close_timeout_s": 10.0,
        "outbox_path": str(tmp_path / "outbox"),
        "deadletter_path": str(tmp_path / "deadletter.jsonl"),
    }
    base.update(kw)
    return WebhookSettings(**base)


def rx(name: str, url: str, **kw: Any) -> WebhookReceiver:
    return WebhookReceiver(name=name, url=url, min_severity="info", **kw)


def exchange_at(ts: float) -> Exchange:
    return Exchange(ts=ts, request=None, response=None)


def resolution(
    incident: str = "inc-g1", group: str = "g1", last: float = T0 + 1, quiet: float = 60.0
) -> IncidentResolved:
    return IncidentResolved(
        incident_id=incident,
        group_key=f"pool-1/cross_tenant_contamination/{group}",
        cache_domain="pool-1",
        first_ts=T0,
        last_ts=last,
        resolved_at=last + quiet,
        alerts=2,
    )


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
