"""Issue 42: the OTLP receiver is bounded by what a body decodes to, not only by its bytes.

One 16 KB gzip'd body of 8.4 M empty spans drove the receiver to 3.5 GB and was answered 200 after 41 s;
5.6 M `{}` spans in JSON to 1.9 GB. A payload with more spans than otlp.max_spans_per_request, or that
would decode to more than otlp.max_decoded_objects messages or JSON values, is now refused whole with 413
before anything is built, counted and dead-lettered with its reason. Through the real HTTP receiver."""

from __future__ import annotations

import gzip
import io
from typing import Any

import httpx
import orjson
import pytest
from otlp_hostile import good_span

from streams.inputs.otlp_http import OtlpReceiver
from streams.outputs import JsonlOutput
from streams.settings import Settings
from tests.support.otlp import export_request
from tests.support.otlp_attacks import empty_spans_json, empty_spans_proto, pb_field, pb_request

PROTO_GZIP = {"content-type": "application/x-protobuf", "content-encoding": "gzip"}
JSON_GZIP = {"content-type": "application/json", "content-encoding": "gzip"}


class Served:
    def __init__(self, settings: Settings) -> None:
        self.events, self.rejects = io.BytesIO(), io.BytesIO()
        self.receiver = OtlpReceiver(settings, JsonlOutput(self.events, self.rejects))
        self.url = f"http://127.0.0.1:{self.receiver.start_in_thread()}"

    def post(self, body: bytes, headers: dict[str, str]) -> httpx.Response:
        return httpx.post(f"{self.url}/v1/traces", content=gzip.compress(body), headers=headers, timeout=120)

    def dead_letters(self) -> list[dict[str, Any]]:
        return [orjson.loads(x) for x in self.rejects.getvalue().splitlines()]


@pytest.fixture
def served(request: Any) -> Any:
    s = Served(Settings(otlp=getattr(request, "param", {})))
    yield s
    s.receiver.stop_thread()


def test_a_body_of_empty_protobuf_spans_is_refused_before_it_is_decoded(served: Served) -> None:
    """40,000 empty spans (80 KB, under 1 KB gzip'd) against the default 32,768: before, 200 and all of
    them decoded (the issue's 8.4 M took 3.5 GB)."""
    r = served.post(empty_spans_proto(40_000), PROTO_GZIP)
    assert r.status_code == 413 and r.text.startswith("too_many_spans:")
    assert served.receiver.counters["rejects.too_many_spans"] == 1
    assert served.receiver.counters["spans.skipped"] == 0  # not one span was built
    assert [d["reason"] for d in served.dead_letters()] == ["too_many_spans"]
    assert httpx.get(f"{served.url}/health").status_code == 200


@pytest.mark.parametrize("served", [{"max_decoded_objects": 4096}], indirect=True)
def test_a_json_body_that_decodes_to_too_many_values_is_refused_before_it_is_parsed(served: Served) -> None:
    r = served.post(empty_spans_json(5_000), JSON_GZIP)
    assert r.status_code == 413 and r.text.startswith("too_many_objects:")
    assert served.receiver.counters["rejects.too_many_objects"] == 1
    # a real batch under the bound is mapped as ever
    ok = served.post(orjson.dumps(export_request([good_span("r-1"), good_span("r-2")])), JSON_GZIP)
    assert ok.status_code == 200 and ok.json() == {}
    assert served.receiver.counters["spans.mapped"] == 2


@pytest.mark.parametrize("served", [{"max_decoded_objects": 4096}], indirect=True)
def test_one_span_of_many_empty_events_is_refused_by_the_object_bound(served: Served) -> None:
    """Few spans, many messages inside one: the spans limit alone would not see it."""
    span = pb_field(0x12, b"\x5a\x00" * 5_000)  # a span whose field 11 (events) is 5,000 empty events
    r = served.post(pb_request(span), PROTO_GZIP)
    assert r.status_code == 413 and r.text.startswith("too_many_objects:")


@pytest.mark.parametrize("served", [{"max_spans_per_request": 3}], indirect=True)
def test_the_span_limit_counts_json_spans_and_a_batch_at_the_limit_passes(served: Served) -> None:
    spans = [good_span(f"r-{i}") for i in range(4)]
    r = served.post(orjson.dumps(export_request(spans)), JSON_GZIP)
    assert r.status_code == 413 and r.text.startswith("too_many_spans:")
    assert served.post(orjson.dumps(export_request(spans[:3])), JSON_GZIP).status_code == 200
    assert served.receiver.counters["spans.mapped"] == 3


@pytest.mark.parametrize("served", [{"max_decoded_objects": 4096}], indirect=True)
def test_log_bodies_are_bounded_by_what_they_decode_to(served: Served) -> None:
    """/v1/logs counted its records only once protobuf had built them all: one record of 5,000 empty
    attributes (field 6), or 5,000 `{}` records in JSON, are refused before anything is built."""
    record = pb_field(0x12, b"\x32\x00" * 5_000)  # a scope_logs whose one log record holds 5,000 attributes
    r = httpx.post(f"{served.url}/v1/logs", content=gzip.compress(pb_field(0x0A, pb_field(0x12, record))),
                   headers=PROTO_GZIP, timeout=60)  # fmt: skip
    assert r.status_code == 413 and r.text.startswith("too_many_objects:")
    records = b'{"resourceLogs":[{"scopeLogs":[{"logRecords":[' + b",".join([b"{}"] * 5_000) + b"]}]}]}"
    r = httpx.post(f"{served.url}/v1/logs", content=gzip.compress(records), headers=JSON_GZIP, timeout=60)
    assert r.status_code == 413 and r.text.startswith("too_many_objects:")
    assert served.receiver.counters["rejects.too_many_objects"] == 2
