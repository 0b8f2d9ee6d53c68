"""Shared by the webhook tests: a real HTTP receiver on loopback, and alert/settings builders."""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import orjson

from schemas.alert import Alert, IncidentResolved, Signal
from schemas.exchange import Exchange
from streams.settings import WebhookReceiver, WebhookSettings
from streams.sinks.webhook import verify_signature

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
