"""A receiver URL's credentials reach the receiver and nowhere else: not the dead-letter file, not the logs."""

from __future__ import annotations

import base64
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from webhook_helpers import Receiver, free_port, make_alert, rx, settings_for

from streams.sinks.webhook import DeadLetterStore, WebhookSink

PASSWORD, TOKEN, BEARER = "pw-71c2a9e0d4", "tk-3f08b6c1e5", "br-5d9e2a7c10"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.stop()


OTHER = "other-9a8b7c6d5e"


def test_dead_letter_stores_a_redacted_url_and_a_stable_target(
    tmp_path: Path, receiver: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    base = f"http://127.0.0.1:{receiver.port}/hook"
    for path in (f"/hook?token={TOKEN}", f"/hook?token={OTHER}", "/basic?x=1"):
        receiver.script[path] = [400, 400]
    receivers = [
        rx("a", f"{base}?token={TOKEN}", headers={"Authorization": f"Bearer {BEARER}"}),
        rx("b", f"{base}?token={OTHER}"),
        rx("c", f"http://ops:{PASSWORD}@127.0.0.1:{receiver.port}/basic?x=1"),
    ]
    sink = WebhookSink(settings_for(tmp_path, receivers))
    # httpx's own level too: another module may have quieted it, and its INFO line is the one that leaked.
    with caplog.at_level(logging.DEBUG), caplog.at_level(logging.DEBUG, logger="httpx"):
        sink.on_alert(make_alert(0))
        sink.on_alert(make_alert(1, group="g2"))
        sink.close()
    # The credentials did go where they belong: the header as configured, userinfo as basic auth.
    assert receiver.all(f"/hook?token={TOKEN}")[0]["headers"]["Authorization"] == f"Bearer {BEARER}"
    basic = receiver.all("/basic?x=1")[0]["headers"]["Authorization"].split()[1]
    assert base64.b64decode(basic).decode() == f"ops:{PASSWORD}"
    # ... and not into the dead-letter file or any log line (httpx logs each request's URL at INFO).
    raw = (tmp_path / "deadletter.jsonl").read_text()
    assert "HTTP Request: POST" in caplog.text
    for leak in (PASSWORD, TOKEN, BEARER, OTHER):
        assert leak not in raw and leak not in caplog.text
    by_rx: dict[str, list[dict[str, object]]] = {}
    for dl in DeadLetterStore(tmp_path / "deadletter.jsonl").read():
        by_rx.setdefault(str(dl["receiver"]), []).append(dl)
    assert {k: len(v) for k, v in by_rx.items()} == {"a": 2, "b": 2, "c": 2}
    assert by_rx["a"][0]["url"] == f"{base}?token=****"
    assert by_rx["c"][0]["url"] == f"http://****:****@127.0.0.1:{receiver.port}/basic?x=****"
    # One target id per receiver URL, the same for every letter; two URLs that redact alike still differ.
    assert by_rx["a"][0]["target"] == by_rx["a"][1]["target"]
    assert by_rx["a"][0]["url"] == by_rx["b"][0]["url"] and by_rx["a"][0]["target"] != by_rx["b"][0]["target"]
    assert len(str(by_rx["a"][0]["target"])) == 16


def test_unreachable_receiver_dead_letter_is_redacted(tmp_path: Path) -> None:
    url = f"http://ops:{PASSWORD}@127.0.0.1:{free_port()}/hook?token={TOKEN}"  # nothing listens there
    sink = WebhookSink(settings_for(tmp_path, [rx("r", url)], max_retries=1))
    sink.on_alert(make_alert(0))
    sink.close()
    [dl] = DeadLetterStore(tmp_path / "deadletter.jsonl").read()
    assert str(dl["reason"]).startswith("retries exhausted: transport_error")
    assert PASSWORD not in str(dl) and TOKEN not in str(dl)
