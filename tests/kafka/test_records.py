"""The internal topics' framing and records, without a broker: what goes in comes out, bad bytes are errors."""

from __future__ import annotations

import orjson
import pytest

from detectors.reorder import EXCHANGE_RANK, OrderKey
from schemas.events import Fingerprint, Request, Response, parse_event
from schemas.exchange import EXCHANGE_ADAPTER, CanaryHit, Exchange, TextFingerprint
from streams.kafka import frames, records

REQ = {
    "type": "request",
    "event_id": "q",
    "ts": "2026-08-27T10:00:00.120+02:00",
    "request_id": "r",
    "tenant_id": "t",
    "model": "m",
    "prompt_tokens": 812345,
    "session_id": "s",
    "context_window": 1048576,
    "max_output_tokens": 64,
    "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
}
RESP = {
    "type": "response",
    "event_id": "p",
    "ts": 1787817641.9,
    "request_id": "r",
    "tenant_id": "t",
    "model": "m",
    "cache_domain": "d",
    "status_code": 200,
    "finish_reason": "stop",
    "usage": {"input_tokens": 1, "output_tokens": 3},
    "ttft_ms": 41,
    "duration_ms": 5200.5,
}
FP = {"scheme": "winnow-v1", "k": 5, "w": 12, "key_id": "abc", "words": 9, "hashes": [0, 7, 2**64 - 1]}


@pytest.mark.parametrize(
    "raw",
    [
        REQ,
        {**REQ, "prompt_fingerprint": FP, "cache_domain": "d"},
        RESP,
        {**RESP, "output_fingerprint": FP, "usage": None},
        {
            "type": "cache_stats",
            "event_id": "s",
            "ts": 1.5,
            "cache_domain": "d",
            "role": "prefill",
            "capacity_tokens": 681280,
            "used_tokens": 3,
            "context_window": 1048576,
        },
    ],
)
def test_an_event_record_rebuilds_the_validated_event(raw: dict) -> None:
    event = parse_event(orjson.dumps(raw))
    back, keys = records.event_from_record(records.event_record(event, [5, 2**64 - 1]))  # type: ignore[arg-type]
    assert type(back) is type(event)
    assert back == event
    assert back.model_dump_json() == event.model_dump_json()
    assert keys == [5, 2**64 - 1]
    if isinstance(back, Request) and back.prompt_fingerprint is not None:
        assert isinstance(back.prompt_fingerprint, Fingerprint)


def test_an_exchange_record_rebuilds_the_exchange() -> None:
    req, resp = parse_event(orjson.dumps(REQ)), parse_event(orjson.dumps(RESP))
    assert isinstance(req, Request) and isinstance(resp, Response)
    hit = CanaryHit(marker_id="m1", owner_tenant_id="probe-a", owner_session_id=None)
    pair = Exchange(5.0, req, resp, TextFingerprint(hashes=[1, 2**64 - 1], words=3), None, [hit])
    orphan = Exchange(ts=6.0, request=req, response=None, prompt_print=None, orphan="no_response")
    for ex in (pair, orphan):
        back = records.exchange_from_record(records.exchange_record(ex))
        assert back == ex
        assert EXCHANGE_ADAPTER.dump_json(back) == EXCHANGE_ADAPTER.dump_json(ex)
        assert back.request_id == ex.request_id and back.cache_domain == ex.cache_domain


@pytest.mark.parametrize(
    ("decode", "raw"),
    [
        (records.event_from_record, b"not json"),
        (records.event_from_record, b'["request", [1, 2], null]'),
        (records.event_from_record, b'["alert", [], null]'),
        (records.exchange_from_record, b"[1, 2]"),
        (records.exchange_from_record, b'[1.0, null, null, null, null, [], "lost"]'),  # no such orphan
        (records.exchange_from_record, b'[1.0, null, null, null, null, [["m"]], null]'),  # a hit of one field
        (records.plant_from_record, b'["e", 1.0]'),
    ],
)
def test_a_malformed_record_is_a_record_error(decode: object, raw: bytes) -> None:
    with pytest.raises(records.RecordError):
        decode(raw)  # type: ignore[operator]


def test_a_plant_record_round_trips() -> None:
    plant = records.Plant("c1", 2.5, 2**64 - 3, "mid", "probe-a", None)
    assert records.plant_from_record(records.plant_record(plant)) == plant


def test_frames_round_trip_with_positions_order_keys_and_progress() -> None:
    items = [
        frames.Item(frames.Source(frames.INPUT, 3), 10, 0, "event", b'{"a":1}'),
        frames.Item(frames.Source(frames.JOIN, 1), 11, 2, "exchange", b"", OrderKey(5.5, EXCHANGE_RANK, "r\n1"), "dom"),
    ]
    batch = frames.Batch(items, wm=(1, 5.25), marks={0: 1.0, 3: 2.0}, idle=[3])
    assert frames.decode(frames.encode(batch)) == batch
    assert frames.decode(frames.encode(frames.Batch([]))) == frames.Batch([])


@pytest.mark.parametrize(
    "value",
    [
        b"",
        b"no newline",
        b'{"v":1,"items":[]}\n',
        b'{"v":2,"items":[["x",0,0,0,"event",0]]}\n',
        b'{"v":2,"items":[["input",0,0,0,"event",5]]}\nabc',
        b"[1]\n",
    ],
)
def test_a_malformed_frame_is_a_frame_error(value: bytes) -> None:
    with pytest.raises(frames.FrameError):
        frames.decode(value)


def test_split_keeps_messages_under_the_limit_and_every_item_in_order() -> None:
    items = [frames.Item(frames.Source(frames.INPUT, 0), i, 0, "event", b"x" * 100) for i in range(50)]
    runs = frames.split(items, 1000)
    assert [it for run in runs for it in run] == items
    assert all(sum(len(it.payload) + 80 for it in run) <= 1000 for run in runs)
    big = [frames.Item(frames.Source(frames.INPUT, 0), 0, 0, "event", b"x" * 5000)]
    assert frames.split(big, 1000) == [big]  # too large for any message: alone, not dropped


# --- k-gram positions (docs/adr/0004, "coverage") ---------------------------------------------------------

FP_POS = {**FP, "scheme": "winnow-v2", "positions": [0, 2, 4]}


def test_an_event_record_keeps_the_fingerprint_positions() -> None:
    event = parse_event(orjson.dumps({**RESP, "output_fingerprint": FP_POS}))
    back, _ = records.event_from_record(records.event_record(event))  # type: ignore[arg-type]
    assert isinstance(back, Response) and back.output_fingerprint is not None
    assert back.output_fingerprint.positions == [0, 2, 4]
    assert back == event and back.model_dump_json() == event.model_dump_json()


def test_event_records_written_before_positions_still_decode() -> None:
    """Both earlier layouts, as a previous version's worker left them on the join topic: a fingerprint object
    without the `positions` key, and the array layout of six values. They mean no positions (the count rule)."""
    event = parse_event(orjson.dumps({**REQ, "prompt_fingerprint": FP}))
    assert isinstance(event, Request)
    kind, values, keys = orjson.loads(records.event_record(event))
    for added in ("positions", "sentences", "sentence_ends", "hashes_b64", "positions_b64", "tools", "identifiers"):
        del values["prompt_fingerprint"][added]
    as_object = orjson.dumps([kind, values, keys])
    values["prompt_fingerprint"] = [FP[f] for f in ("scheme", "k", "w", "key_id", "words", "hashes")]
    as_array = orjson.dumps([kind, [values[f] for f in Request.model_fields], keys])
    for raw in (as_object, as_array):
        back, _ = records.event_from_record(raw)
        assert back == event
        assert isinstance(back, Request) and back.prompt_fingerprint is not None
        assert back.prompt_fingerprint.positions is None
    # one field too few or too many is still an error
    values["prompt_fingerprint"] = values["prompt_fingerprint"][:-1]
    with pytest.raises(records.RecordError, match="Fingerprint record has 5 fields, expected 13"):
        records.event_from_record(orjson.dumps([kind, [values[f] for f in Request.model_fields], keys]))


def test_an_exchange_record_keeps_the_output_positions_and_older_ones_decode() -> None:
    from detectors.fingerprint import Fingerprinter, positions_of

    fpr = Fingerprinter("records-test", 5, 4)
    req, resp = parse_event(orjson.dumps(REQ)), parse_event(orjson.dumps(RESP))
    assert isinstance(req, Request) and isinstance(resp, Response)
    out = fpr.fingerprint_text("one two three four five six seven eight nine ten eleven twelve thirteen fourteen")
    assert positions_of(out) is not None
    pair = Exchange(5.0, req, resp, TextFingerprint(hashes=[1, 2], words=9), out, [])
    raw = records.exchange_record(pair)
    back = records.exchange_from_record(raw)
    assert back == pair and EXCHANGE_ADAPTER.dump_json(back) == EXCHANGE_ADAPTER.dump_json(pair)
    assert back.output_print is not None and positions_of(back.output_print) == positions_of(out)
    assert back.prompt_print is not None and positions_of(back.prompt_print) is None
    assert back.output_print.sentences == out.sentences
    # A record from before the positions: prints of [words, hashes].
    older = orjson.loads(raw)
    older[4] = older[4][:2]
    old = records.exchange_from_record(orjson.dumps(older))
    assert old == pair and old.output_print is not None and positions_of(old.output_print) is None
    older[4] = [out.words, out.hashes, [0]]
    with pytest.raises(records.RecordError, match="1 positions for"):
        records.exchange_from_record(orjson.dumps(older))


def test_response_records_written_before_the_response_id_still_decode() -> None:
    """A response record as a worker before `response_id` and `error_type` left it on the join topic or in a
    snapshot, in both layouts: it decodes, without them; a new record keeps them."""
    event = parse_event(orjson.dumps({**RESP, "response_id": "chatcmpl-9", "error_type": "429"}))
    assert isinstance(event, Response)
    back, _ = records.event_from_record(records.event_record(event))
    assert back == event and isinstance(back, Response) and back.response_id == "chatcmpl-9"
    old = parse_event(orjson.dumps(RESP))
    kind, values, keys = orjson.loads(records.event_record(old))
    for added in ("response_id", "error_type"):
        del values[added]
    as_object = orjson.dumps([kind, values, keys])
    values["usage"] = [values["usage"][f] for f in ("input_tokens", "output_tokens")]  # the array layout's nesting
    as_array = orjson.dumps([kind, [values[f] for f in Response.model_fields if f in values], keys])
    for raw in (as_object, as_array):
        back, _ = records.event_from_record(raw)
        assert back == old and isinstance(back, Response) and back.response_id is None and back.error_type is None
