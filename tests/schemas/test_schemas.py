"""The wire contract: valid and invalid events of each type, extra fields, both timestamp forms."""

from __future__ import annotations

import json

import jsonschema
import pytest

from schemas import Alert, EventError, format_ts, parse_event, parse_ts
from schemas.events import CacheStats, Canary, Request, Response
from schemas.exchange import EXCHANGE_ADAPTER, CanaryHit, Exchange, TextFingerprint
from schemas.export import schemas, write_schemas

VALID = {
    "request": {
        "type": "request",
        "event_id": "e-1",
        "ts": "2026-08-27T10:00:00.250+02:00",
        "request_id": "req-1",
        "tenant_id": "acme",
        "model": "glm-5.3",
        "prompt_tokens": 812_345,
        "session_id": "s-9",
        "canaries": ["CTK-CANARY-00ff00ff00ff00ff00ff00ff00ff00ff"],
    },
    "response": {
        "type": "response",
        "event_id": "e-2",
        "ts": 1787817600.5,
        "request_id": "req-1",
        "tenant_id": "acme",
        "model": "glm-5.3",
        "cache_domain": "pd-1",
        "status_code": 200,
        "usage": {"input_tokens": 1, "output_tokens": 300},
        "ttft_ms": 41.0,
    },
    "cache_stats": {
        "type": "cache_stats",
        "event_id": "e-3",
        "ts": "2026-08-27T08:00:00Z",
        "cache_domain": "pd-1",
        "role": "prefill",
        "capacity_tokens": 681_280,
        "used_tokens": 400_000,
        "context_window": 1_048_576,
    },
    "canary": {
        "type": "canary",
        "event_id": "e-4",
        "ts": 0,
        "tenant_id": "probe-a",
        "marker": "CTK-CANARY-5f1c0a9e2b7d4c31a0b1c2d3e4f56789",
    },
}
MODELS = {"request": Request, "response": Response, "cache_stats": CacheStats, "canary": Canary}


@pytest.mark.parametrize("kind", sorted(VALID))
def test_valid_event_of_each_type_parses_to_its_model(kind: str) -> None:
    e = parse_event(json.dumps(VALID[kind]))
    assert isinstance(e, MODELS[kind])
    assert e.event_id == VALID[kind]["event_id"]


@pytest.mark.parametrize("kind", sorted(VALID))
def test_unknown_fields_are_ignored(kind: str) -> None:
    e = parse_event(json.dumps(VALID[kind] | {"x_future_field": {"nested": [1, 2]}, "zz": 1}))
    assert not hasattr(e, "x_future_field")


def test_both_timestamp_forms_mean_the_same_instant() -> None:
    a = parse_event(json.dumps(VALID["canary"] | {"ts": "2026-08-27T10:00:00+02:00"}))
    b = parse_event(json.dumps(VALID["canary"] | {"ts": 1787817600}))
    assert a.ts == b.ts == 1787817600.0
    assert parse_ts("2026-08-27T08:00:00Z") == 1787817600.0
    assert format_ts(1787817600.25) == "2026-08-27T08:00:00.250Z"


@pytest.mark.parametrize(
    ("kind", "patch", "field"),
    [
        ("request", {"prompt_tokens": "812345"}, "request.prompt_tokens"),
        ("request", {"prompt_tokens": -1}, "request.prompt_tokens"),
        ("request", {"ts": "2026-08-27T10:00:00"}, "request.ts"),
        ("request", {"tenant_id": ""}, "request.tenant_id"),
        ("response", {"status_code": 700}, "response.status_code"),
        ("response", {"usage": {"input_tokens": "1"}}, "response.usage.input_tokens"),
        ("cache_stats", {"role": "both"}, "cache_stats.role"),
        ("cache_stats", {"capacity_tokens": 1.5}, "cache_stats.capacity_tokens"),
    ],
)
def test_invalid_fields_are_named_in_the_error(kind: str, patch: dict, field: str) -> None:
    with pytest.raises(EventError) as info:
        parse_event(json.dumps(VALID[kind] | patch))
    assert info.value.reason == "invalid"
    assert field in info.value.detail


def test_missing_required_field_is_named() -> None:
    obj = dict(VALID["response"])
    del obj["cache_domain"]
    with pytest.raises(EventError, match=r"response\.cache_domain: Field required"):
        parse_event(json.dumps(obj))


def test_unknown_type_not_json_and_oversized_have_their_own_reasons() -> None:
    with pytest.raises(EventError) as info:
        parse_event(json.dumps(VALID["canary"] | {"type": "banana"}))
    assert info.value.reason == "invalid"
    with pytest.raises(EventError) as info:
        parse_event(b'{"type": "request", ')
    assert info.value.reason == "not_json"
    with pytest.raises(EventError) as info:
        parse_event(json.dumps(VALID["request"] | {"prompt_text": "x" * 5000}), max_bytes=1024)
    assert info.value.reason == "oversized"


def test_json_schema_export_covers_every_type_and_accepts_both_ts_forms(tmp_path) -> None:
    paths = write_schemas(tmp_path)
    names = {p.name for p in paths}
    kinds = ("request", "response", "cache_stats", "canary", "alert", "lead", "exchange", "event")
    assert names == {f"{n}.schema.json" for n in kinds}
    req = json.loads((tmp_path / "request.schema.json").read_text())
    assert {"type", "event_id", "ts", "request_id", "tenant_id", "model", "prompt_tokens"} <= set(req["required"])
    ts_types = {alt["type"] for alt in req["properties"]["ts"]["anyOf"]}
    assert ts_types == {"number", "string"}
    assert set(schemas()["alert"]["required"]) >= {"alert_id", "ts", "kind", "severity", "cache_domain", "summary"}


def test_exchange_schema_is_exported_and_describes_what_sinks_receive(tmp_path) -> None:
    write_schemas(tmp_path)
    schema = json.loads((tmp_path / "exchange.schema.json").read_text())
    assert schema["$id"].endswith("/exchange.json")
    assert {"ts", "request", "response"} <= set(schema["required"])
    validator = jsonschema.Draft202012Validator(schema)
    request = Request.model_validate(VALID["request"] | {"prompt_text": None})
    response = Response.model_validate(VALID["response"] | {"output_text": None})
    pair = Exchange(
        1787817600.25,
        request,
        response,
        TextFingerprint(hashes=[3, 5, 8], words=12),
        None,
        [CanaryHit(marker_id="m1", owner_tenant_id="globex")],
    )
    orphan = Exchange(ts=1787817601.0, request=request, response=None, orphan="no_response")
    for ex in (pair, orphan):
        validator.validate(EXCHANGE_ADAPTER.dump_python(ex, mode="json"))
    bad = EXCHANGE_ADAPTER.dump_python(pair, mode="json")
    bad["orphan"] = "lost"
    assert not validator.is_valid(bad)
    assert not validator.is_valid(EXCHANGE_ADAPTER.dump_python(pair, mode="json", exclude={"ts"}))


def test_alert_round_trips_with_rfc3339_time() -> None:
    a = Alert(
        alert_id="x",
        ts=1787817600.0,
        kind="overlong_accepted",
        severity="high",
        cache_domain="pd-1",
        score=0.9,
        summary="s",
        group_key="g",
        incident_id="i",
    )
    data = json.loads(a.model_dump_json())
    assert data["ts"] == "2026-08-27T08:00:00.000Z"
    assert Alert.model_validate_json(a.model_dump_json()) == a


# --- hostile input (issue 11) -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "ts",
    [
        int("1" + "0" * 400),  # OverflowError in float() before the bound
        1e20,
        253402300800,  # 10000-01-01T00:00:00Z
        "9999-12-31T23:00:00-12:00",  # a valid RFC 3339 time, past year 9999 once in UTC
        "0001-01-01T00:00:00+01:00",
        -1,
    ],
)
def test_event_time_outside_years_1970_to_9999_is_invalid_not_a_crash(ts: object) -> None:
    raw = json.dumps(VALID["canary"] | {"ts": ts})
    with pytest.raises(EventError) as info:
        parse_event(raw)
    assert info.value.reason == "invalid" and "canary.ts" in info.value.detail and "1970..9999" in info.value.detail


def test_the_last_representable_second_is_accepted_and_formats() -> None:
    ev = parse_event(json.dumps(VALID["canary"] | {"ts": "9999-12-31T23:59:59Z"}))
    assert format_ts(ev.ts) == "9999-12-31T23:59:59.000Z"
    assert format_ts(1e300) == "9999-12-31T23:59:59.998Z" and format_ts(float("nan")) == "1970-01-01T00:00:00.000Z"


@pytest.mark.parametrize(
    "field, patch",
    [
        ("request.prompt_tokens", {"prompt_tokens": int("9" * 400)}),
        ("request.context_window", {"context_window": 2**64}),
    ],
)
def test_huge_counts_are_invalid(field: str, patch: dict) -> None:
    with pytest.raises(EventError) as info:
        parse_event(json.dumps(VALID["request"] | patch))
    assert info.value.reason == "invalid" and field in info.value.detail


def test_huge_durations_are_invalid() -> None:
    with pytest.raises(EventError) as info:
        parse_event(json.dumps(VALID["response"] | {"ttft_ms": 0.5}).replace("0.5", "1e400"))
    assert info.value.reason == "invalid" and "response.ttft_ms" in info.value.detail


WEAK_MARKERS = [
    "that",
    "CTK-CANARY-1234",
    "CTK-CANARY-0123456789a",  # 11 digits: 44 bits, too few
    "CTK-CANARY-deadbeefcafe",  # a hex word: no digit
    "CTK-CANARY-202608271000",  # a number (a date): no letter
    "CTK-CANARY-a1a1a1a1a1a1a1",  # a run: 2 distinct digits
    "CTK-CANARY-0123456789ABCDEF0123456789ABCDEF",  # upper case: not the format
    "-0123456789abcdef0123456789abcdef",  # no prefix
    "CTK CANARY 0123456789abcdef0123456789abcdef",
]


@pytest.mark.parametrize("marker", WEAK_MARKERS)
def test_weak_canary_markers_are_rejected_with_their_own_reason(marker: str) -> None:
    # A canary event is its marker: a weak one rejects the event.
    with pytest.raises(EventError) as info:
        parse_event(json.dumps(VALID["canary"] | {"marker": marker}))
    assert info.value.reason == "weak_canary"
    assert marker not in str(info.value)  # a marker is a secret: never echoed


@pytest.mark.parametrize("marker", WEAK_MARKERS)
def test_a_weak_marker_in_a_request_is_dropped_and_the_request_kept(marker: str) -> None:
    from schemas.events import dropped_canaries

    strong = VALID["request"]["canaries"][0]
    ev = parse_event(json.dumps(VALID["request"] | {"canaries": [marker, strong, 7], "prompt_text": "the prompt"}))
    assert isinstance(ev, Request) and ev.canaries == [strong] and ev.prompt_text == "the prompt"
    notes = dropped_canaries(ev)
    assert [n.split(":")[0] for n in notes] == ["canaries[0]", "canaries[2]"] and "not a string" in notes[1]
    assert all(marker not in n for n in notes)  # the dropped marker is not quoted either
    # Every other field still decides: an invalid request with a weak marker is rejected as before.
    with pytest.raises(EventError) as info:
        parse_event(json.dumps(VALID["request"] | {"canaries": [marker], "prompt_tokens": -1}))
    assert info.value.reason in ("invalid", "weak_canary")
    assert dropped_canaries(parse_event(json.dumps(VALID["request"]))) == ()


@pytest.mark.parametrize(
    "marker",
    [
        "CTK-CANARY-0123456789abcdef",  # 64 bits (token_hex(8))
        "CTK-CANARY-3f9a0c1be27d",  # 48 bits (token_hex(6))
        "probe-5e0c8a1f9d2b7",  # 52 bits, another prefix
        "CTK-CANARY-00ff00ff00ff00ff00ff00ff00ff00ff",  # 24+ digits: taken as before, whatever they look like
    ],
)
def test_markers_of_48_to_64_random_bits_are_taken(marker: str) -> None:
    assert parse_event(json.dumps(VALID["canary"] | {"marker": marker})).marker == marker  # type: ignore[union-attr]
    ev = parse_event(json.dumps(VALID["request"] | {"canaries": [marker]}))
    assert isinstance(ev, Request) and ev.canaries == [marker]
