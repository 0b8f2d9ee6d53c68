"""Issue 16's hot-path changes, without a broker: records as objects (and the previous layout still
decodes), and the join stage's messages carrying the watermark as it is (what holds alerts back)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import orjson
import pytest

from schemas.events import Fingerprint, Request, Response, Usage, parse_event
from streams.kafka import frames, records
from streams.kafka.stages import JoinStage, JoinState
from streams.settings import Settings
from tests.support.stagepipe import StagePipeline

REQ = {"type": "request", "event_id": "q", "ts": 1_780_000_000.25, "request_id": "r", "tenant_id": "t",
       "model": "m", "prompt_tokens": 812345, "session_id": "s", "cache_domain": "d"}  # fmt: skip
RESP = {"type": "response", "event_id": "p", "ts": 1_780_000_000.5, "request_id": "r", "tenant_id": "t",
        "model": "m", "cache_domain": "d", "status_code": 200, "usage": {"input_tokens": 1, "output_tokens": 3},
        "ttft_ms": 41.0}  # fmt: skip
KEY = "unit-test-fingerprint-key"
FP = {"k": 5, "w": 12, "key_id": "abc", "words": 9, "hashes": [0, 7, 2**64 - 1]}


def _previous_layout(model: Any) -> list[Any]:
    """A record value as the array layout wrote it: field values in field order, nested models as arrays."""
    out = []
    for name in type(model).model_fields:
        v = getattr(model, name)
        out.append(_previous_layout(v) if isinstance(v, (Fingerprint, Usage)) else v)
    return out


@pytest.mark.parametrize("raw", [REQ, {**REQ, "prompt_fingerprint": FP}, RESP, {**RESP, "output_fingerprint": FP}])
def test_an_event_record_is_an_object_and_the_previous_array_layout_still_decodes(raw: dict[str, Any]) -> None:
    event = parse_event(orjson.dumps(raw))
    assert isinstance(event, (Request, Response))
    kind, values, keys = orjson.loads(records.event_record(event, [3]))
    assert (kind, keys) == (event.type, [3])
    assert values == orjson.loads(event.model_dump_json())  # the model's own fields, nested ones as objects
    old = orjson.dumps([event.type, _previous_layout(event), None])
    back, _ = records.event_from_record(old)
    assert back == event and back.model_dump_json() == event.model_dump_json()


@pytest.mark.parametrize(
    "raw",
    [
        b'["request", {"event_id": "q"}, null]',
        b'["response", "text", null]',
        b'[1.0, {"a": 1}, null, null, null, [], null]',
    ],
)
def test_a_record_object_with_other_fields_is_a_record_error(raw: bytes) -> None:
    decode = records.exchange_from_record if raw.startswith(b"[1.0") else records.event_from_record
    with pytest.raises(records.RecordError):
        decode(raw)


def _settings(**kafka: Any) -> Settings:
    return Settings.model_validate({"detection": {"fingerprint_key": KEY}, "kafka": {"input_partitions": 1, **kafka}})


def test_a_join_message_with_items_carries_the_current_watermark_not_the_last_stepped_one() -> None:
    s = _settings(internal_partitions=1, watermark_lateness_s=0.0, watermark_step_s=10.0)
    stage = JoinStage(s, Counter(), started=0.0)
    st = JoinState.fresh(s.detection)
    t0 = 1_780_000_000.0
    wms = []
    for i in range(3):  # three pairs 1 s apart in event time: the step (10 s) is never reached again
        req = {**REQ, "event_id": f"q{i}", "request_id": f"r{i}", "ts": t0 + i}
        resp = {**RESP, "event_id": f"p{i}", "request_id": f"r{i}", "ts": t0 + i}
        q, p = parse_event(orjson.dumps(req)), parse_event(orjson.dumps(resp))
        assert isinstance(q, Request) and isinstance(p, Response)
        src = frames.Source(frames.INPUT, 0)
        items = [frames.Item(src, i, 0, "event", records.event_record(q))]
        items.append(frames.Item(src, i, 1, "event", records.event_record(p)))
        res = stage.handle(st, 0, i, frames.Batch(items, marks={0: t0 + i}, idle=[]), now=1.0)
        (send,) = res.sends
        assert send.items, "the pair goes to the domain partition"
        wms.append(send.wm)
    assert wms == [(0, t0), (0, t0 + 1), (0, t0 + 2)]


def test_with_the_defaults_an_alert_leaves_once_event_time_passed_it_by_lateness_and_step() -> None:
    """Default settings: the over-long pair's alert comes out with the first batch that moves every input
    partition past it by the lateness plus one watermark step (0.15 s of event time; it was 2 s)."""
    s = Settings.model_validate({"detection": {"fingerprint_key": KEY}})
    k = s.kafka
    assert k.watermark_lateness_s + k.watermark_step_s <= 0.15 + 1e-9
    pipe = StagePipeline(s)
    t0 = 1_780_000_000.0
    stats = {"type": "cache_stats", "event_id": "st", "ts": t0, "cache_domain": "d", "role": "prefill",
             "capacity_tokens": 681_280, "used_tokens": 0}  # fmt: skip
    pair = [{**REQ, "ts": t0 + 0.01, "prompt_tokens": 900_000},
            {**RESP, "ts": t0 + 0.01, "usage": {"input_tokens": 1, "output_tokens": 12}}]  # fmt: skip
    pipe.feed([(0, orjson.dumps(stats))] + [(p, orjson.dumps(stats | {"event_id": f"st{p}"})) for p in range(1, 4)])
    pipe.feed((0, orjson.dumps(e)) for e in pair)
    assert not pipe.out.alerts  # not yet passed by every input partition
    later = t0 + 0.01 + k.watermark_lateness_s + k.watermark_step_s + 0.001
    pipe.feed((p, orjson.dumps(stats | {"event_id": f"late{p}", "ts": later})) for p in range(k.input_partitions))
    assert [a.kind for a in pipe.out.alerts] == ["overlong_accepted"], pipe.out.alerts
