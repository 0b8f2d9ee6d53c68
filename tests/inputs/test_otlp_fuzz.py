"""Fuzzing the OTLP mapping as the replay is fuzzed (tests/schemas/test_fuzz.py; issue 25, "Done when").

Arbitrary OTLP/JSON export requests -- mostly well-formed, with the values an attacker would pick
(inf, 1e999, NaN, 400-digit times, deep nesting, bad base64, wrong types) -- never raise out of the
mapping: every span is mapped (two events), skipped, or rejected with a reason, and no reject quotes a
value. The same payloads replayed with `--format otlp-json` lose nothing: events + rejects = items.
Before, OverflowError came out of 95 of 1,500 examples. CI runs the derandomized profile (conftest)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from detectors.monitor import make_fingerprinter
from streams.embedded.runner import EmbeddedRunner
from streams.inputs.otlp import SpanMapper
from streams.inputs.otlp_decode import decode_spans
from streams.settings import Settings, load_settings

WALL = 1_790_000_000.0  # the wall clock the replay is given
MARK = "zqxmark"  # in every string value: a reject that quotes a value would show it
FUZZ = settings(
    max_examples=int(os.environ.get("CROSSTALK_FUZZ_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def mostly(good: st.SearchStrategy[Any], bad: st.SearchStrategy[Any], odds: int = 4) -> st.SearchStrategy[Any]:
    """`good` about odds times in odds+1 (st.one_of would merge repeated branches into one; the bad branch is
    a middle value, as Hypothesis favours the bounds of a range)."""
    return st.integers(0, odds).flatmap(lambda i: bad if i == odds // 2 else good)


numberish = st.sampled_from(["inf", "-inf", "1e999", "NaN", "nan", "1e20", "12", "-5", "9" * 400, "0x10", "", " 7 "])
strings = st.one_of(st.text(max_size=12).map(lambda t: MARK + t), numberish)
leaf = st.one_of(
    strings.map(lambda s: {"stringValue": s}),
    mostly(st.integers(-(2**63), 2**63).map(str), st.sampled_from(["9" * 400, "1e5", 1.5, float("inf"), 7.0])).map(
        lambda v: {"intValue": v}
    ),
    st.one_of(
        st.floats(allow_nan=False, allow_infinity=False), st.sampled_from(["Infinity", "-Infinity", "NaN", "x"])
    ).map(lambda v: {"doubleValue": v}),
    st.booleans().map(lambda b: {"boolValue": b}),
    st.sampled_from(["aGVsbG8=", "not base64!", 5]).map(lambda b: {"bytesValue": b}),
    st.sampled_from([{}, None, 5, "raw", [], {"arrayValue": None}, {"arrayValue": {"values": 7}}, {"kvlistValue": []}]),
)
any_value = st.recursive(
    leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3).map(lambda vs: {"arrayValue": {"values": vs}}),
        st.lists(st.tuples(st.text(max_size=4), inner), max_size=3).map(
            lambda kvs: {"kvlistValue": {"values": [{"key": k, "value": v} for k, v in kvs]}}
        ),
    ),
    max_leaves=8,
)


def _deep(depth: int) -> str:
    return "[" + '{"message":' * depth + '{"content":"' + MARK + '"}' + "}" * depth + "]"


def _message(text: str) -> str:
    return orjson.dumps([{"role": "user", "parts": [{"type": "text", "content": MARK + text}]}]).decode()


messages = st.one_of(
    st.text(max_size=40).map(_message),
    st.integers(1, 1000).map(_deep),
    st.just(MARK + " not json ["),
).map(lambda s: {"stringValue": s})  # fmt: skip
KEYS = [
    "gen_ai.request.model", "gen_ai.response.model", "crosstalk.tenant_id", "user.id", "crosstalk.cache_domain",
    "server.address", "server.port", "crosstalk.prompt_tokens", "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens", "http.response.status_code", "crosstalk.ttft_ms",
    "gen_ai.response.time_to_first_chunk", "crosstalk.context_window", "gen_ai.request.max_tokens",
    "crosstalk.canaries", "crosstalk.request_id", "gen_ai.conversation.id", "gen_ai.response.finish_reasons",
    "gen_ai.prompt.0.content", "other",
]  # fmt: skip
good_attrs = st.fixed_dictionaries(
    {
        "gen_ai.operation.name": st.sampled_from(["chat", "chat", "embeddings"]).map(lambda s: {"stringValue": s}),
        "gen_ai.request.model": st.just({"stringValue": "m"}),
        "crosstalk.tenant_id": st.sampled_from(["acme", "globex", "probe-a"]).map(lambda s: {"stringValue": s}),
        "crosstalk.cache_domain": st.just({"stringValue": "d1"}),
        "crosstalk.prompt_tokens": st.integers(0, 10**6).map(lambda n: {"intValue": str(n)}),
        "gen_ai.input.messages": messages,
        "gen_ai.output.messages": messages,
    }
)  # fmt: skip
extra = mostly(st.just({}), st.dictionaries(st.sampled_from(KEYS), any_value, min_size=1, max_size=3), odds=1)
attrs = st.tuples(good_attrs, extra).map(lambda ab: [{"key": k, "value": v} for k, v in {**ab[0], **ab[1]}.items()])
valid_ns = st.integers(int((WALL - 3600) * 1e9), int((WALL + 300) * 1e9))
hostile_times = st.sampled_from(["1" + "0" * 399, "-5", "abc", 1.5e18, True, None, str(2**64)])
times = mostly(st.one_of(valid_ns.map(str), valid_ns), hostile_times, odds=8)
hex_id = st.text("0123456789abcdef", min_size=32, max_size=32)
ids = mostly(hex_id, st.one_of(st.text(max_size=6), st.none(), st.just(5)), odds=8)
span = st.fixed_dictionaries(
    {
        "traceId": ids,
        "spanId": mostly(st.text("0123456789abcdef", min_size=16, max_size=16), st.none(), odds=8),
        "name": st.text(max_size=8),
        "startTimeUnixNano": times,
        "endTimeUnixNano": times,
        "attributes": attrs,
        "events": st.lists(
            st.fixed_dictionaries({"name": st.sampled_from(["gen_ai.user.message", "gen_ai.choice", "x"]),
                                   "attributes": attrs}), max_size=2),
        "status": mostly(st.sampled_from([{}, {"code": 2}, {"code": "STATUS_CODE_ERROR"}, None]),
                         st.sampled_from([{"code": 1.5}, {"code": "x"}, {"code": [2]}])),
    }
)  # fmt: skip
spans = st.lists(mostly(span, st.sampled_from([None, 5, "x"]), odds=6), min_size=1, max_size=5)
payloads = st.lists(spans, min_size=1, max_size=2).map(
    lambda groups: {
        "resourceSpans": [
            {"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "gw"}}]},
             "scopeSpans": [{"spans": g}]} for g in groups
        ]
    }
)  # fmt: skip
SETTINGS = Settings()


def _mapper() -> SpanMapper:
    return SpanMapper(SETTINGS.otlp, make_fingerprinter(SETTINGS.detection))


def _spans_in(payload: dict[str, Any]) -> int:
    return sum(len(ss["spans"]) for rs in payload["resourceSpans"] for ss in rs["scopeSpans"])


@FUZZ
@example(
    payload={"resourceSpans": [{"scopeSpans": [{"spans": [{
        "traceId": "ab" * 16, "spanId": "cd" * 8, "startTimeUnixNano": "1", "endTimeUnixNano": "2",
        "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
                       {"key": "gen_ai.request.model", "value": {"stringValue": "m"}},
                       {"key": "crosstalk.tenant_id", "value": {"stringValue": "t"}},
                       {"key": "crosstalk.cache_domain", "value": {"stringValue": "d"}},
                       {"key": "crosstalk.prompt_tokens", "value": {"doubleValue": "Infinity"}}]}]}]}]}
)  # fmt: skip
@given(payload=payloads)
def test_mapping_of_arbitrary_otlp_json_never_raises_and_accounts_for_every_span(payload: dict[str, Any]) -> None:
    out = _mapper().map_payload(orjson.dumps(payload), "otlp_json")
    assert out.payload_error is None
    assert len(out.events) % 2 == 0
    assert len(out.events) // 2 + len(out.rejects) + sum(out.skipped.values()) == _spans_in(payload)
    for r in out.rejects:
        assert r.reason and MARK not in orjson.dumps(r.record()).decode(), r
    assert "internal_error" not in {r.reason for r in out.rejects}


@FUZZ
@given(data=st.binary(max_size=400))
def test_mapping_of_arbitrary_bytes_never_raises(data: bytes) -> None:
    for encoding in ("otlp_proto", "otlp_json", "auto"):
        out = _mapper().map_payload(data, encoding)
        if out.payload_error is not None:  # refused whole: one reject with its reason, nothing mapped
            assert out.payload_error.reason and out.rejects == [out.payload_error] and not out.events
            continue
        # Decoded (random bytes often parse as protobuf): every span decoded is mapped, skipped or rejected.
        decoded = len(decode_spans(data, encoding))
        assert len(out.events) // 2 + len(out.rejects) + sum(out.skipped.values()) == decoded, encoding


@FUZZ
@given(lines=st.lists(payloads, min_size=1, max_size=4))
def test_replay_of_arbitrary_otlp_json_loses_nothing(tmp_path: Path, lines: list[dict[str, Any]]) -> None:
    src = tmp_path / "spans.jsonl"
    src.write_bytes(b"".join(orjson.dumps(p) + b"\n" for p in lines))
    expected = 0
    for p in lines:  # what the decoder yields per line: each event or reject is one item
        out = _mapper().map_payload(orjson.dumps(p), "otlp_json")
        expected += len(out.events) + len(out.rejects)
    runner = EmbeddedRunner(load_settings(ingest={"reorder_lateness_s": 3600.0}))
    runner._wall_clock = lambda: WALL
    result = runner.run_files([str(src)], format="otlp-json")
    assert "internal_error" not in result.rejects and not result.input_errors
    assert result.events_total + sum(result.rejects.values()) == expected, (result.events, result.rejects)


# --- decoded-size amplification (issue 42) ---------------------------------------------------------------

SMALL = Settings(otlp={"max_spans_per_request": 64, "max_decoded_objects": 2048})
shape = st.fixed_dictionaries(
    {"spans": st.integers(0, 200), "events": st.integers(0, 3000), "attrs": st.integers(0, 1500),
     "array": st.integers(0, 3000), "proto": st.booleans()}
)  # fmt: skip


def _amplified(sh: dict[str, int]) -> tuple[bytes, int, int]:
    """A payload of empty messages at every level (spans, a span's events and attributes, an array value's
    values); its encoding, the messages (protobuf) or JSON values it decodes to, and its spans."""
    from tests.support.otlp_attacks import pb_field, pb_request

    spans = 1 + sh["spans"]
    if sh["proto"]:
        first = b"\x5a\x00" * sh["events"] + pb_field(0x4A, pb_field(0x12, b"")) * sh["attrs"]
        first += pb_field(0x4A, pb_field(0x12, pb_field(0x2A, b"\x0a\x00" * sh["array"])))
        data = pb_request(pb_field(0x12, first) + b"\x12\x00" * sh["spans"])
        return data, 2 + spans + sh["events"] + 2 * sh["attrs"] + 3 + sh["array"], spans
    array = {"key": "a", "value": {"arrayValue": {"values": [{}] * sh["array"]}}}
    first = {"events": [{}] * sh["events"], "attributes": [{"key": "k", "value": {}}] * sh["attrs"] + [array]}
    obj = {"resourceSpans": [{"scopeSpans": [{"spans": [first] + [{}] * sh["spans"]}]}]}

    def values(v: Any) -> int:
        inner = v.values() if isinstance(v, dict) else v if isinstance(v, list) else ()
        return 1 + sum(values(x) for x in inner)

    return orjson.dumps(obj), values(obj), spans


@FUZZ
@given(sh=shape)
def test_mapping_is_bounded_by_what_a_payload_decodes_to(sh: dict[str, int]) -> None:
    """Whatever the amplification, the mapping never raises; a protobuf payload is refused exactly when it
    holds more spans or messages than allowed, a JSON one is mapped only when it decodes to no more values
    than allowed; and what the mapping allocates is bounded by the limits, not by what the bytes decode to."""
    import tracemalloc

    data, objects, spans = _amplified(sh)
    mapper = SpanMapper(SMALL.otlp, make_fingerprinter(SMALL.detection))
    tracemalloc.start()
    try:
        out = mapper.map_payload(data, "otlp_proto" if sh["proto"] else "otlp_json")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    refused = out.payload_error.reason if out.payload_error else None
    assert refused in (None, "too_many_spans", "too_many_objects"), refused
    if sh["proto"]:
        expect = "too_many_objects" if objects > 2048 else "too_many_spans" if spans > 64 else None
        # the walk stops at the first bound passed: spans come before a later span's many messages
        assert refused == expect or (refused is not None and expect is not None), (refused, objects, spans)
    elif refused is None:
        assert objects <= 2048 and spans <= 64
    else:
        assert spans > 64 or data.count(b"{") + data.count(b"[") + data.count(b",") + 1 > 2048
    if refused is None:
        assert sum(out.skipped.values()) + len(out.rejects) == spans
    # before the bounds: up to 30 MB traced for these payloads (2,000 messages ~ 0.6 MB)
    assert peak < 1024 * 2048 + 4 * len(data), (peak, objects)
