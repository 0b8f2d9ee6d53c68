"""/v1/logs under bad input: every malformed payload is refused with a reason (400/413), every unreadable record
is rejected by itself and counted, and the receiver goes on serving. Never a crash, never a silent drop."""

from __future__ import annotations

import gzip
from typing import Any

import httpx
import orjson
import pytest

from streams.inputs.otlp_logs import DETAILS_EVENT, decode_logs
from streams.inputs.otlp_receiver import OtlpReceiver
from streams.outputs import FunctionOutput
from streams.settings import Settings

JSON = {"content-type": "application/json"}


def record(**over: Any) -> dict[str, Any]:
    rec = {
        "timeUnixNano": "1787817600000000000",
        "traceId": "ab" * 16,
        "spanId": "cd" * 8,
        "eventName": DETAILS_EVENT,
        "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}}],
    }
    return rec | over


def export(*records: Any) -> bytes:
    return orjson.dumps({"resourceLogs": [{"scopeLogs": [{"logRecords": list(records)}]}]})


@pytest.fixture
def served() -> Any:
    events: list[Any] = []
    receiver = OtlpReceiver(Settings(otlp={"logs_max_records": 4, "logs_wait_s": 0.1}), FunctionOutput(events.append))
    port = receiver.start_in_thread()
    yield f"http://127.0.0.1:{port}", receiver
    receiver.stop_thread()


def test_payloads_that_are_not_log_exports_are_refused_whole(served: Any) -> None:
    base, receiver = served
    url = f"{base}/v1/logs"
    cases = [
        (b"{not json", JSON, 400, "not_json"),
        (b'{"resourceLogs": 7}', JSON, 400, "not_otlp"),
        (b'{"resourceSpans": []}', JSON, 400, "not_otlp"),  # a trace export sent to the logs path
        (b"\x0a\xff\xff", {"content-type": "application/x-protobuf"}, 400, "not_otlp"),
        (export(*[record()] * 5), JSON, 413, "too_many_records"),
    ]
    for body, headers, status, reason in cases:
        r = httpx.post(url, content=body, headers=headers)
        assert r.status_code == status and reason in r.text, (body[:40], r.status_code, r.text)
    bomb = gzip.compress(b"{" + b" " * 20_000_000 + b"}")
    r = httpx.post(url, content=bomb, headers=JSON | {"content-encoding": "gzip"})
    assert r.status_code == 413  # the body limits of /v1/traces hold here too
    assert httpx.get(f"{base}/health").text == "ok"
    assert receiver.counters["rejects.too_many_records"] == 1 and receiver.counters["rejects.not_otlp"] == 3


def test_unreadable_records_are_rejected_one_by_one(served: Any) -> None:
    base, receiver = served
    deep: Any = {"stringValue": "x"}
    for _ in range(40):
        deep = {"kvlistValue": {"values": [{"key": "k", "value": deep}]}}
    bad = [
        "not an object",
        record(timeUnixNano="9" * 400),
        record(attributes=[{"key": "gen_ai.input.messages", "value": deep}]),
    ]
    r = httpx.post(f"{base}/v1/logs", content=export(*bad, record(eventName="some.other.event")), headers=JSON)
    assert r.status_code == 200
    partial = r.json()["partialSuccess"]
    assert partial["rejectedLogRecords"] == "3"
    for reason in ("bad_log", "bad_times", "too_deep"):
        assert reason in partial["errorMessage"]
    assert receiver.joined.joiner.counters["skipped.not_inference_details"] == 1
    counters = httpx.get(f"{base}/counters").json()
    assert counters["logs.requests"] == 1 and counters["rejects.bad_log"] == 1


def test_decode_logs_reads_both_encodings_alike() -> None:
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
    from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs, ScopeLogs

    rec = LogRecord(
        time_unix_nano=1_787_817_600_000_000_000,
        trace_id=bytes.fromhex("ab" * 16),
        span_id=bytes.fromhex("cd" * 8),
        event_name=DETAILS_EVENT,
        attributes=[KeyValue(key="gen_ai.operation.name", value=AnyValue(string_value="chat"))],
    )
    proto = ExportLogsServiceRequest(resource_logs=[ResourceLogs(scope_logs=[ScopeLogs(log_records=[rec])])])
    [a] = decode_logs(proto.SerializeToString(), "otlp_proto", 10)
    [b] = decode_logs(export(record()), "otlp_json", 10)
    assert a == b
