"""End to end on the real broker: a worker raises an incident and resolves it, `deliver` tells a receiver both.

Worker as a subprocess, the delivery consumer in a thread, a real HTTP receiver on loopback.
Waits are bounded; nothing asserts on wall-clock durations.
"""

from __future__ import annotations

import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import orjson
import pytest
from conftest import wait_for

from streams.kafka.deliver import DeliveryConsumer
from streams.producer import produce_file
from streams.settings import WebhookReceiver, WebhookSettings
from streams.sinks.webhook import verify_signature
from tests.support.rawevents import tick_events

pytestmark = pytest.mark.kafka

SECRET = "e2e-secret"
OVER = 812_345
T0 = 1_787_817_600.0
QUIET_S = 600.0


class Receiver:
    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                ok = verify_signature(SECRET, self.headers.get("X-Crosstalk-Timestamp", ""), body,
                                      self.headers.get("X-Crosstalk-Signature", ""))  # fmt: skip
                if ok:
                    with outer.lock:
                        outer.bodies.append(orjson.loads(body))
                self.send_response(200 if ok else 401)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def alert_ids(self, status: str) -> set[str]:
        with self.lock:
            return {aid for b in self.bodies if b["status"] == status for aid in b["alert_ids"]}

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _events(path: Path, kafka: Any) -> None:
    lines: list[dict[str, Any]] = [
        {"type": "cache_stats", "event_id": "cs-1", "ts": T0, "cache_domain": "pool-e2e", "role": "prefill",
         "capacity_tokens": 681_280, "used_tokens": 600_000},
    ]  # fmt: skip
    for i in range(2):
        ts = T0 + 10 + i * 5
        rid = f"req-e2e-{i}"
        lines.append({"type": "request", "event_id": f"rq-{i}", "ts": ts, "request_id": rid, "tenant_id": "acme",
                      "model": "glm-5.3", "prompt_tokens": OVER})  # fmt: skip
        lines.append({"type": "response", "event_id": f"rs-{i}", "ts": ts + 2, "request_id": rid, "tenant_id": "acme",
                      "model": "glm-5.3", "cache_domain": "pool-e2e", "status_code": 200,
                      "usage": {"input_tokens": 1, "output_tokens": 50}, "ttft_ms": 40.0})  # fmt: skip
    # Event time moves on everywhere (every input and internal partition) far past the quiet period.
    lines += tick_events(T0, kafka, ahead_s=3 * QUIET_S)
    path.write_bytes(b"\n".join(orjson.dumps(x) for x in lines) + b"\n")


def test_worker_resolution_reaches_the_receiver_through_deliver(kafka_names: Any, workers: Any, tmp_path: Path) -> None:
    receiver = Receiver()
    w = workers.start(kafka_names, CROSSTALK_DETECTION__INCIDENT_QUIET_S=str(QUIET_S))
    wait_for(lambda: w.counters() is not None or not w.alive(), 90, what="the worker's web server")
    assert w.alive(), w.log_tail()
    settings = kafka_names.settings(
        webhooks=WebhookSettings(
            receivers=[WebhookReceiver(name="ops", url=receiver.url, min_severity="high")],
            secret=SECRET,
            group_wait_s=0.0,
            group_interval_s=0.0,
            deliver_group_id=f"deliver-e2e-{uuid.uuid4().hex[:8]}",
            deadletter_path=str(tmp_path / "dl.jsonl"),
        )
    )
    events = tmp_path / "events.jsonl"
    _events(events, settings.kafka)
    stop = threading.Event()
    consumer = DeliveryConsumer(settings, stop_event=stop)
    t = threading.Thread(target=consumer.run, daemon=True)
    t.start()
    try:
        res = produce_file(str(events), settings.kafka)
        assert not res.bad_lines
        # The alerts and the resolution sit on different partitions of the alerts topic, so the
        # resolution may be read first: whatever the order, every alert ends up fired and resolved.
        wait_for(
            lambda: (
                len(receiver.alert_ids("firing")) == 2
                and receiver.alert_ids("resolved") == receiver.alert_ids("firing")
            ),
            150,
            what="both alerts fired and resolved",
        )
    finally:
        stop.set()
        t.join(60)
        receiver.stop()
    assert not t.is_alive()
    with receiver.lock:
        bodies = list(receiver.bodies)
    resolved = [b for b in bodies if b["status"] == "resolved"]
    alerts = [a for b in resolved for a in b["alerts"]]
    assert {a["request_ids"][0] for a in alerts} == {"req-e2e-0", "req-e2e-1"}
    assert len({a["incident_id"] for a in alerts}) == 1  # one incident ...
    # ... resolved at the core's time: its last alert (the second response) + the quiet period.
    from schemas.timefmt import parse_ts

    last_alert = max(parse_ts(a["ts"]) for a in alerts)
    assert {parse_ts(b["ends_at"]) for b in resolved} == {last_alert + QUIET_S}
    assert consumer.resolutions >= 1 and consumer.stats.deadlettered == 0
