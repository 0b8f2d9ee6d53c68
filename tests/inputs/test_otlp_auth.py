"""Issue 25, trust: bearer tokens per sender, who may assert which tenant, probe tenants and canaries,
request ids scoped by sender, the refusal of an open non-loopback receiver, and tokens never printed.
Through the real HTTP receiver, the real OTLP exporter and the real CLI."""

from __future__ import annotations

import io
import logging
import os
import socket
import subprocess
import sys
import time
from typing import Any

import httpx
import orjson
import pytest
from otlp_hostile import T_NOW, good_span, with_attr

from streams.embedded.output import EmbeddedOutput
from streams.inputs.otlp_auth import UnsafeBind, check_bind
from streams.inputs.otlp_http import OtlpReceiver
from streams.outputs import JsonlOutput
from streams.settings import Settings
from tests.support.otlp import export_request

TOKEN_A = "gw-a-token-0123456789abcdef"
TOKEN_B = "gw-b-token-fedcba9876543210"
TOKEN_PROBE = "prober-token-00112233445566"
TOKENS = [
    {"sender": "gw-a", "token": TOKEN_A, "tenants": ["bank-a", "acme-*"]},
    {"sender": "gw-b", "token": TOKEN_B, "tenants": ["*"]},  # may speak for every customer, not for probes
    {"sender": "prober", "token": TOKEN_PROBE, "tenants": [], "probe": True},
]
DETECTION = {"overlap_warmup_docs": 0, "overlap_warmup_s": 0.0}
SECRET = " ".join(f"ledger{i} invoice{i * 7} quarterly margin forecast vendor{i}" for i in range(40))


def bearer(token: str) -> dict[str, str]:
    return {"content-type": "application/json", "authorization": f"Bearer {token}"}


class Served:
    def __init__(self, output: Any, settings: Settings) -> None:
        self.output = output
        self.receiver = OtlpReceiver(settings, output)
        self.url = f"http://127.0.0.1:{self.receiver.start_in_thread()}"

    def post(self, spans: list[dict[str, Any]], token: str | None) -> httpx.Response:
        headers = bearer(token) if token else {"content-type": "application/json"}
        return httpx.post(f"{self.url}/v1/traces", content=orjson.dumps(export_request(spans)), headers=headers)


@pytest.fixture
def jsonl() -> Any:
    events = io.BytesIO()
    served = Served(JsonlOutput(events, io.BytesIO()), Settings(otlp={"tokens": TOKENS}))
    served.events = events  # type: ignore[attr-defined]
    yield served
    served.receiver.stop_thread()


def _events(served: Any) -> list[dict[str, Any]]:
    return [orjson.loads(x) for x in served.events.getvalue().splitlines()]


def test_requests_without_a_known_token_get_401_and_are_not_read(jsonl: Any, caplog: Any) -> None:
    caplog.set_level(logging.WARNING, "crosstalk.otlp")
    spans = [good_span("r-1", tenant="bank-a")]
    for token in (None, "not-a-known-token-at-all-000", TOKEN_A[:-1]):
        r = jsonl.post(spans, token)
        assert r.status_code == 401 and r.headers["WWW-Authenticate"].startswith("Bearer")
    r = httpx.post(
        f"{jsonl.url}/v1/traces", content=b"{}", headers={"authorization": f"Basic {TOKEN_A}"}
    )  # another scheme
    assert r.status_code == 401
    assert jsonl.receiver.counters["rejects.unauthenticated"] == 4 and jsonl.receiver.counters["requests"] == 0
    assert not _events(jsonl)
    assert "not-a-known-token" not in caplog.text and TOKEN_A[:-1] not in caplog.text
    assert jsonl.post(spans, TOKEN_A).status_code == 200


def test_a_sender_asserts_only_its_tenants_and_request_ids_are_scoped_by_sender(jsonl: Any) -> None:
    r = jsonl.post([good_span("r-1", tenant="bank-a"), good_span("r-2", tenant="acme-eu"),
                    good_span("r-3", tenant="bank-b")], TOKEN_A)  # fmt: skip
    assert r.status_code == 200
    partial = r.json()["partialSuccess"]
    assert partial["rejectedSpans"] == "1" and partial["errorMessage"].startswith("tenant_not_allowed:")
    assert "'gw-a'" in partial["errorMessage"] and "'bank-b'" in partial["errorMessage"]
    got = {(e["tenant_id"], e["request_id"]) for e in _events(jsonl)}
    assert got == {("bank-a", "gw-a/r-1"), ("acme-eu", "gw-a/r-2")}
    assert jsonl.receiver.counters["sender.gw-a.rejected_spans"] == 1


def test_probe_tenants_and_canaries_only_from_a_probe_sender(jsonl: Any) -> None:
    marker = {"arrayValue": {"values": [{"stringValue": "CTK-CANARY-" + "cd" * 16}]}}
    # gw-b may assert any customer ("*"), yet neither a probe tenant nor canaries on its own tenants
    r = jsonl.post([good_span("p-1", tenant="probe-a"), with_attr(good_span("c-1", tenant="acme"),
                    "crosstalk.canaries", marker)], TOKEN_B)  # fmt: skip
    assert r.json()["partialSuccess"]["rejectedSpans"] == "2"
    assert {m.split(":")[0] for m in r.json()["partialSuccess"]["errorMessage"].split("; ")} == {
        "tenant_not_allowed",
        "canary_not_allowed",
    }
    r = jsonl.post([with_attr(good_span("p-2", tenant="probe-a"), "crosstalk.canaries", marker)], TOKEN_PROBE)
    assert r.json() == {}
    r = jsonl.post([good_span("p-3", tenant="acme")], TOKEN_PROBE)  # a prober is not a gateway
    assert "tenant_not_allowed" in r.json()["partialSuccess"]["errorMessage"]
    assert [(e["tenant_id"], e["request_id"]) for e in _events(jsonl)] == [
        ("probe-a", "prober/p-2"),
        ("probe-a", "prober/p-2"),
    ]


def _leak_spans(rid_victim: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """bank-a's prompt, and then bank-b's answer carrying it: a cross-tenant leak."""
    prompt = [{"role": "user", "parts": [{"type": "text", "content": SECRET}]}]
    a = with_attr(good_span("a-1", tenant="bank-a", t=T_NOW), "gen_ai.input.messages",
                  {"stringValue": orjson.dumps(prompt).decode()})  # fmt: skip
    b = with_attr(good_span(rid_victim, tenant="bank-b", t=T_NOW + 5), "gen_ai.output.messages",
                  {"stringValue": orjson.dumps(prompt).decode()})  # fmt: skip
    return a, b


@pytest.fixture
def embedded() -> Any:
    tokens = [*TOKENS, {"sender": "gw-c", "token": "gw-c-token-0000000000000", "tenants": ["bank-b"]}]
    settings = Settings(otlp={"tokens": tokens}, detection=DETECTION)
    served = Served(EmbeddedOutput(settings, io.BytesIO(), io.BytesIO()), settings)
    yield served
    served.receiver.stop_thread()
    served.output.close()


def test_a_sender_cannot_frame_another_senders_tenant(embedded: Any) -> None:
    """gw-a may assert bank-a only: its 'bank-b' span carrying bank-a's prompt is refused, so no alert."""
    a, b = _leak_spans("b-1")
    assert embedded.post([a], TOKEN_A).json() == {}
    r = embedded.post([b], TOKEN_A)
    assert r.json()["partialSuccess"]["errorMessage"].startswith("tenant_not_allowed:")
    embedded.output.close()
    assert not [al for al in embedded.output.runner.result.alerts if al.kind == "cross_tenant_contamination"]


def test_reusing_another_senders_request_id_does_not_suppress_its_span(embedded: Any) -> None:
    """gw-b sends a span with the victim's request id first; gw-c's real span with that id is still taken
    (it is gw-c/b-1, not gw-b/b-1) and its leak is still found. A sender's own reuse stays a duplicate."""
    a, b = _leak_spans("b-1")
    decoy = good_span("b-1", tenant="bank-b", t=T_NOW + 4)
    assert embedded.post([a], TOKEN_A).json() == {}
    assert embedded.post([decoy], TOKEN_B).json() == {}
    assert embedded.post([b], "gw-c-token-0000000000000").json() == {}  # not a duplicate
    again = embedded.post([b], "gw-c-token-0000000000000")
    assert again.json()["partialSuccess"]["errorMessage"].startswith("duplicate:")
    embedded.output.close()
    found = [al for al in embedded.output.runner.result.alerts if al.kind == "cross_tenant_contamination"]
    assert found and found[0].tenant_id == "bank-b" and found[0].source_tenant_id == "bank-a"
    assert "gw-c/b-1" in found[0].request_ids


def test_real_exporter_with_a_bearer_token(jsonl: Any) -> None:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExportResult

    provider = TracerProvider(resource=Resource.create({"crosstalk.cache_domain": "d1"}))
    start = int(T_NOW * 1e9)
    span = provider.get_tracer("t").start_span("chat m", start_time=start, attributes={
        "gen_ai.operation.name": "chat", "gen_ai.request.model": "m", "crosstalk.tenant_id": "bank-a",
        "crosstalk.request_id": "sdk-1", "gen_ai.usage.input_tokens": 5})  # fmt: skip
    span.end(end_time=start + 10**9)
    url = f"{jsonl.url}/v1/traces"
    without = OTLPSpanExporter(endpoint=url)
    with_token = OTLPSpanExporter(endpoint=url, headers={"Authorization": f"Bearer {TOKEN_A}"})
    try:
        assert without.export([span]) == SpanExportResult.FAILURE
        assert with_token.export([span]) == SpanExportResult.SUCCESS
    finally:
        without.shutdown()
        with_token.shutdown()
        provider.shutdown()
    assert {e["request_id"] for e in _events(jsonl)} == {"gw-a/sdk-1"}


# --- the receiver's bind, and tokens are secrets -----------------------------------------------------


def test_an_open_receiver_refuses_a_non_loopback_bind_unless_told_and_then_warns(caplog: Any) -> None:
    open_settings = Settings()
    check_bind(open_settings, "127.0.0.1", 14318)
    check_bind(open_settings, "::1", 14318)
    for bind in ("0.0.0.0", "::", "10.1.2.3", "otlp.internal"):
        with pytest.raises(UnsafeBind, match="without authentication"):
            check_bind(open_settings, bind, 14318)
    check_bind(Settings(otlp={"tokens": TOKENS}), "0.0.0.0", 14318)  # authenticated: fine
    caplog.set_level(logging.WARNING, "crosstalk.otlp")
    check_bind(Settings(otlp={"allow_unauthenticated": True}), "0.0.0.0", 14318)
    assert "UNAUTHENTICATED OTLP RECEIVER on 0.0.0.0:14318" in caplog.text


def _cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "streams.cli", *args],
        capture_output=True, text=True, timeout=120, env={**os.environ, **env},
    )  # fmt: skip


def test_cli_refuses_to_start_an_open_receiver_on_all_addresses(tmp_path: Any) -> None:
    rejects = tmp_path / "rejects.jsonl"
    done = _cli("otlp", "--to", "jsonl", "--bind", "0.0.0.0", "--port", "1", "--rejects", str(rejects))
    assert done.returncode == 5, done.stderr
    assert "refusing to listen on 0.0.0.0:1 without authentication" in done.stderr
    assert not rejects.exists()


def test_settings_output_and_errors_never_show_a_token() -> None:
    env = {"CROSSTALK_OTLP__TOKENS": orjson.dumps(TOKENS).decode()}
    done = _cli("settings", **env)
    assert done.returncode == 0, done.stderr
    tokens = orjson.loads(done.stdout)["otlp"]["tokens"]
    assert [t["sender"] for t in tokens] == ["gw-a", "gw-b", "prober"]
    assert {t["token"] for t in tokens} == {"**********"}
    assert TOKEN_A not in done.stdout + done.stderr
    short = orjson.dumps([{"sender": "x", "token": "short-secret"}]).decode()
    bad = _cli("settings", CROSSTALK_OTLP__TOKENS=short)
    assert bad.returncode == 5 and "short-secret" not in bad.stdout + bad.stderr
    twice = orjson.dumps([{"sender": "x", "token": TOKEN_A}, {"sender": "y", "token": TOKEN_A}]).decode()
    dup = _cli("settings", CROSSTALK_OTLP__TOKENS=twice)
    assert dup.returncode == 5 and "distinct" in dup.stderr and TOKEN_A not in dup.stdout + dup.stderr


def test_a_settings_validation_error_does_not_quote_the_token() -> None:
    import pydantic

    with pytest.raises(pydantic.ValidationError) as caught:
        Settings(otlp={"tokens": [{"sender": "x", "token": "short-secret"}]})
    assert "short-secret" not in str(caught.value) and "at least 16" in str(caught.value)


BAD_CHAR_TOKENS = [b"Bearer " + TOKEN_A.encode() + c for c in (b"\x01x", b"\x7f", b"\x00")]


def _send_raw_authorization(port: int, value: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        head = b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nAuthorization: " + value
        s.sendall(head + b"\r\nContent-Length: 2\r\n\r\n{}")
        return s.recv(4096)


def test_an_authorization_header_aiohttp_cannot_parse_is_not_logged(jsonl: Any, caplog: Any) -> None:
    """Issue 42: aiohttp logged 'Invalid header value char' with the whole header line, token included."""
    caplog.set_level(logging.DEBUG)
    for value in BAD_CHAR_TOKENS:
        assert _send_raw_authorization(jsonl.receiver.port, value).startswith(b"HTTP/1.0 400")
    assert "unparseable HTTP request" in caplog.text  # the refusal is still logged, without the line
    assert TOKEN_A not in caplog.text and TOKEN_A[:12] not in caplog.text


@pytest.mark.slow  # a receiver process
def test_the_receiver_process_never_writes_a_malformed_token_to_stderr(tmp_path: Any) -> None:
    from tests.support.workerproc import free_port

    port, err = free_port(), tmp_path / "stderr.txt"
    env = {**os.environ, "CROSSTALK_OTLP__PORT": str(port), "CROSSTALK_DETECTION__FINGERPRINT_KEY": "k" * 32,
           "CROSSTALK_OTLP__TOKENS": orjson.dumps(TOKENS).decode()}  # fmt: skip
    cmd = [sys.executable, "-m", "streams.cli", "otlp", "--to", "jsonl", "--events-out", os.devnull]
    with err.open("wb") as stderr:
        proc = subprocess.Popen(cmd, env=env, stderr=stderr)
        try:
            for _ in range(300):
                try:
                    statuses = [_send_raw_authorization(port, v)[:12] for v in BAD_CHAR_TOKENS]
                    break
                except OSError:
                    time.sleep(0.2)
            assert statuses == [b"HTTP/1.0 400"] * 3
        finally:
            proc.terminate()
            proc.wait(30)
    text = err.read_text(errors="replace")
    assert "unparseable HTTP request" in text and TOKEN_A[:12] not in text, text[-2000:]


def test_counters_name_senders_only_to_a_caller_with_a_token(jsonl: Any) -> None:
    """Issue 42: GET /counters without a token listed every sender's name; now the totals only."""
    assert jsonl.post([good_span("r-1", tenant="bank-a")], TOKEN_A).status_code == 200
    anonymous = httpx.get(f"{jsonl.url}/counters").json()
    assert anonymous["requests"] == 1 and anonymous["spans.mapped"] == 1
    assert not [k for k in anonymous if "gw-a" in k or k.startswith("sender.")], anonymous
    wrong = httpx.get(f"{jsonl.url}/counters", headers={"authorization": "Bearer not-a-token-0000000000"}).json()
    assert not [k for k in wrong if k.startswith("sender.")]
    assert httpx.get(f"{jsonl.url}/counters", headers=bearer(TOKEN_B)).json()["sender.gw-a.requests"] == 1
    assert jsonl.receiver.counters["rejects.unauthenticated"] == 0  # reading counters is not a refused request


EVIL = {"sender": "evil", "token": "evil-token-00000000000000", "tenants": ["evil-*"]}


def _forged(rid: str, tenant: str, t: float) -> dict[str, Any]:
    """An answer carrying bank-a's prompt, with the mechanism figures of issue 42's forgery."""
    prompt = [{"role": "user", "parts": [{"type": "text", "content": SECRET}]}]
    span = with_attr(good_span(rid, tenant=tenant, t=t), "gen_ai.output.messages",
                     {"stringValue": orjson.dumps(prompt).decode()})  # fmt: skip
    span = with_attr(span, "crosstalk.prompt_tokens", {"intValue": "723241"})
    span = with_attr(span, "gen_ai.usage.input_tokens", {"intValue": "1"})
    return with_attr(span, "crosstalk.ttft_ms", {"doubleValue": 50.0})


def test_a_sender_cannot_page_about_another_senders_tenant() -> None:
    """Issue 42: a sender allowed evil-* answered evil-1 with bank-a's prompt (sent by gw-a) and forged figures,
    and got a critical cross_tenant_contamination naming bank-a. The finding is still raised and attributed
    (evil-1 may really have received that text) but at most high, marked cross_sender; the same content and
    figures within one sender stay critical."""
    settings = Settings(otlp={"tokens": [*TOKENS, EVIL]}, detection=DETECTION)
    served = Served(EmbeddedOutput(settings, io.BytesIO(), io.BytesIO()), settings)
    try:
        a, _ = _leak_spans("unused")
        assert served.post([a], TOKEN_A).json() == {}
        assert served.post([_forged("e-1", "evil-1", T_NOW + 5)], EVIL["token"]).json() == {}
        a2 = with_attr(good_span("a-2", tenant="bank-a", t=T_NOW + 10), "gen_ai.input.messages",
                       a["attributes"][-1]["value"])  # fmt: skip
        assert served.post([a2, _forged("b-9", "bank-b", T_NOW + 15)], TOKEN_B).json() == {}
    finally:
        served.receiver.stop_thread()
        served.output.close()
    found = [al for al in served.output.runner.result.alerts if al.kind == "cross_tenant_contamination"]
    by_tenant = {al.tenant_id: al for al in found}
    forged = by_tenant["evil-1"]
    assert forged.source_tenant_id == "bank-a" and forged.severity == "high"
    assert all(s.severity != "critical" for s in forged.evidence)
    (content,) = [s for s in forged.evidence if s.name == "cross_tenant_contamination"]
    assert content.figures["cross_sender"] is True and content.figures["source_request_ids"] == ["gw-a/a-1"]
    within = by_tenant["bank-b"]  # gw-b carried both bank-a's prompt and bank-b's answer: its word is enough
    assert within.source_tenant_id == "bank-a" and within.severity == "critical"
    assert "cross_sender" not in str(within.evidence)
