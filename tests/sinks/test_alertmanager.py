"""Against a real Prometheus Alertmanager (v0.28.1, built by scripts/test.sh into .tools/bin).

Alertmanager resolves an alert nobody re-sends once its endsAt (or, without one, resolve_timeout)
has passed. crosstalk therefore re-sends active alerts with endsAt a few intervals ahead, as
Prometheus does, and resolves them explicitly when the core resolves the incident.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from schemas.alert import Alert, IncidentResolved, Signal
from streams.settings import WebhookReceiver, WebhookSettings
from streams.sinks.webhook import WebhookSink

# slow: a real Alertmanager process, held past its resolve timeout
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
BINARY = Path(os.environ.get("CROSSTALK_ALERTMANAGER", ROOT / ".tools" / "bin" / "alertmanager"))
RESOLVE_TIMEOUT_S = 2


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Alertmanager:
    def __init__(self, workdir: Path) -> None:
        self.port = _free_port()
        cfg = workdir / "alertmanager.yml"
        cfg.write_text(
            f"global:\n  resolve_timeout: {RESOLVE_TIMEOUT_S}s\n"
            "route:\n  receiver: blackhole\n  group_wait: 0s\n  group_interval: 1s\n"
            "receivers:\n  - name: blackhole\n"
        )
        self.log = (workdir / "alertmanager.log").open("wb")
        self.proc = subprocess.Popen(
            [
                str(BINARY),
                f"--config.file={cfg}",
                f"--storage.path={workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--cluster.listen-address=",  # one instance, no gossip port
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError("alertmanager did not become ready")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def alerts(self) -> list[dict[str, Any]]:
        """Alerts Alertmanager holds as not resolved (its API leaves resolved ones out)."""
        with urllib.request.urlopen(f"{self.url}/api/v2/alerts", timeout=5) as r:
            return json.loads(r.read())

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.log.close()


@pytest.fixture
def alertmanager(tmp_path: Path) -> Iterator[Alertmanager]:
    if not BINARY.exists():
        msg = f"no Alertmanager binary at {BINARY} (scripts/test.sh builds it: go install ...alertmanager@v0.28.1)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(msg, pytrace=False)
        pytest.skip(msg)
    am = Alertmanager(tmp_path)
    yield am
    am.stop()


def _alert(ts: float) -> Alert:
    return Alert(
        alert_id="al-am-1",
        ts=ts,
        kind="cross_tenant_contamination",
        severity="critical",
        cache_domain="pool-1",
        tenant_id="tenant-a",
        source_tenant_id="tenant-b",
        request_ids=["req-1"],
        score=0.97,
        evidence=[Signal(name="cross_tenant_contamination", severity="critical", score=0.97)],
        summary="response to tenant tenant-a on pool-1 shares 17 fingerprints with tenant tenant-b's recent context",
        group_key="cache_domain=pool-1,category=exposure",
        incident_id="inc-am-1",
    )


def _wait(cond: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.1)
    raise AssertionError("condition not met in time")


def test_alert_stays_firing_past_resolve_timeout_while_incident_open_then_resolves(
    tmp_path: Path, alertmanager: Alertmanager
) -> None:
    settings = WebhookSettings(
        receivers=[WebhookReceiver(name="am", url=f"{alertmanager.url}/api/v2/alerts", format="alertmanager")],
        secret="am-secret",
        group_wait_s=0.0,
        group_interval_s=0.0,
        resend_interval_s=0.5,
        ends_at_intervals=6,  # endsAt 3 s ahead: shorter than the hold below, so only re-sends keep it
        outbox_path=str(tmp_path / "outbox"),
        deadletter_path=str(tmp_path / "dl.jsonl"),
    )
    sink = WebhookSink(settings)
    start = time.time()
    alert = _alert(start - 5)
    try:
        sink.on_alert(alert)
        _wait(lambda: [a["labels"]["alert_id"] for a in alertmanager.alerts()] == ["al-am-1"])
        # Hold the incident open for twice resolve_timeout (and many endsAt horizons): still firing.
        seen_active = 0
        while time.time() < start + 3 * RESOLVE_TIMEOUT_S:
            held = alertmanager.alerts()
            assert [a["labels"]["alert_id"] for a in held] == ["al-am-1"], "Alertmanager resolved an open incident"
            assert held[0]["status"]["state"] == "active"
            seen_active += 1
            time.sleep(0.25)
        assert seen_active >= 10
        assert sink.stats.delivered >= 4  # the first notification and its re-sends
        # The core resolves the incident: Alertmanager hears it at once, with endsAt = resolved_at.
        sink.on_resolved(
            IncidentResolved(
                incident_id="inc-am-1",
                group_key=alert.group_key,
                cache_domain="pool-1",
                first_ts=alert.ts,
                last_ts=alert.ts,
                resolved_at=alert.ts + 1,
                alerts=1,
            )
        )
        _wait(lambda: alertmanager.alerts() == [])
    finally:
        sink.close()
    assert sink.stats.deadlettered == 0
