"""The wire fingerprint's optional k-gram positions (docs/adr/0004, "coverage"): made at the edge, validated on
the way in, read back by the monitor; a fingerprint without them (an older producer) keeps the count rule, and a
bad one is an invalid event with a reason, dead-lettered by the Kafka ingest and rejected by the embedded runner."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import jsonschema
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from detectors.fingerprint import Fingerprinter, positions_of
from schemas.events import EventError, Fingerprint, Response, parse_event
from schemas.export import schemas
from streams.embedded.runner import EmbeddedRunner
from streams.kafka.ingest import IngestStage
from streams.kafka.inputmsg import InputMessage
from streams.settings import Settings

KEY = "positions-tests"
FPR = Fingerprinter(KEY, 5, 4)
TEXT = "the scheduler keeps a complete record of which pages were handed to which request and when 日本語のテキスト"
RESPONSE = {"type": "response", "event_id": "p1", "ts": 1_787_821_200.0, "request_id": "r1", "tenant_id": "acme",
            "model": "m", "cache_domain": "d1", "status_code": 200}  # fmt: skip


def _event(fp: dict[str, Any]) -> bytes:
    return orjson.dumps(RESPONSE | {"output_fingerprint": fp})


def _wire(text: str = TEXT) -> dict[str, Any]:
    return FPR.fingerprint(text).model_dump(mode="json")


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", "the", "ok", "ジャ", "ム", "中文", "Straße", "x1", "."]), max_size=120))
def test_every_edge_fingerprint_is_valid_and_comes_back_with_its_positions(words: list[str]) -> None:
    """What the edge makes always passes the wire's checks (the invariant holds for real winnowing: one position
    per hash, strictly increasing, inside the text), and the monitor reads back what it would have computed."""
    text = " ".join(words)
    parsed = parse_event(_event(_wire(text)))
    assert isinstance(parsed, Response) and parsed.output_fingerprint is not None
    tp = FPR.from_wire(parsed.output_fingerprint)
    local = FPR.fingerprint_text(text)
    assert tp == local
    assert positions_of(tp) == positions_of(local) is not None


def test_the_wire_round_trip_keeps_the_positions() -> None:
    wire = _wire()
    assert wire["positions"] == positions_of(FPR.fingerprint_text(TEXT))
    assert len(wire["positions"]) == len(wire["hashes"]) > 3
    parsed = parse_event(_event(wire))
    assert isinstance(parsed, Response) and parsed.output_fingerprint is not None
    assert parsed.output_fingerprint.positions == wire["positions"]
    assert orjson.loads(parsed.model_dump_json())["output_fingerprint"]["positions"] == wire["positions"]


def test_a_fingerprint_without_positions_still_parses_and_keeps_the_count_rule() -> None:
    """A winnow-v2 producer older than the field: same hashes, no positions, the run-count rule (None)."""
    wire = _wire()
    del wire["positions"]
    parsed = parse_event(_event(wire))
    assert isinstance(parsed, Response) and parsed.output_fingerprint is not None
    assert parsed.output_fingerprint.positions is None
    tp = FPR.from_wire(parsed.output_fingerprint)
    assert tp == FPR.fingerprint_text(TEXT)
    assert positions_of(tp) is None
    # explicit null: the same
    assert parse_event(_event(wire | {"positions": None})) == parsed


def test_repeated_hashes_keep_their_first_position() -> None:
    fp = Fingerprint(k=5, w=4, key_id=FPR.key_id, words=20, hashes=[7, 9, 7, 3], positions=[0, 2, 5, 9])
    tp = FPR.from_wire(fp)
    assert tp.hashes == [7, 9, 3]
    assert positions_of(tp) == [0, 2, 9]


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ({"positions": [0, 4]}, "output_fingerprint: positions has 2 entries for 3 hashes"),
        ({"positions": [0, 4, 4]}, "output_fingerprint: positions must be strictly increasing"),
        ({"positions": [5, 4, 9]}, "positions must be strictly increasing"),
        ({"positions": [0, 4, 16]}, "output_fingerprint: position 16 + k 5 is past the text's 20 units"),
        ({"positions": [-1, 4, 9]}, "output_fingerprint: positions must not be negative"),
        ({"positions": [0, "4", 9]}, "output_fingerprint.positions.1: Input should be a valid integer"),
        ({"positions": {"a": 1}}, "output_fingerprint.positions: Input should be a valid array"),
        ({"hashes": [], "positions": [0]}, "output_fingerprint: positions has 1 entries for 0 hashes"),
    ],
)
def test_bad_positions_are_an_invalid_event_with_a_clear_reason(patch: dict[str, Any], message: str) -> None:
    fp = {"k": 5, "w": 4, "key_id": FPR.key_id, "words": 20, "hashes": [1, 2, 3]} | patch
    with pytest.raises(EventError) as info:
        parse_event(_event(fp))
    assert info.value.reason == "invalid"
    assert message in info.value.detail


def test_positions_are_bounded_like_the_hashes() -> None:
    n = 1_000_001
    fp = {"k": 1, "w": 1, "key_id": "k", "words": n, "hashes": [1], "positions": list(range(n))}
    with pytest.raises(EventError, match=r"output_fingerprint\.positions: List should have at most 1000000 items"):
        parse_event(_event(fp), max_bytes=64 << 20)


def _bad_line() -> bytes:
    wire = _wire()
    wire["positions"] = wire["positions"][::-1]
    return _event(wire)


def test_the_kafka_ingest_dead_letters_an_event_with_bad_positions() -> None:
    s = Settings(detection={"fingerprint_key": KEY, "k": 5, "w": 4})
    stage = IngestStage(s, Counter())
    good = _event(_wire())
    res = stage.read([InputMessage(0, 0, b"r1", _bad_line(), False), InputMessage(0, 1, b"r1", good, False)], 1.0,
                     wall=time.time())  # fmt: skip
    assert [(d.reason, d.offset) for d in res.dead] == [("invalid", 0)]
    assert "positions must be strictly increasing" in res.dead[0].detail
    assert sum(len(v) for v in res.to_join.values()) == 1  # the good one goes on


def test_the_embedded_runner_rejects_an_event_with_bad_positions(tmp_path: Path) -> None:
    s = Settings(detection={"fingerprint_key": KEY, "k": 5, "w": 4})
    path = tmp_path / "events.jsonl"
    path.write_bytes(_bad_line() + b"\n" + _event(_wire()) + b"\n")
    res = EmbeddedRunner(s).run_files([str(path)])
    assert res.rejects == Counter({"invalid": 1})
    assert res.events_total == 1


def test_the_json_schema_export_describes_positions_as_optional() -> None:
    schema = schemas()["response"]
    fp = schema["$defs"]["Fingerprint"]
    assert "positions" in fp["properties"] and "positions" not in fp["required"]
    validator = jsonschema.Draft202012Validator(schema)
    wire = _wire()
    validator.validate(orjson.loads(_event(wire)))
    del wire["positions"]
    validator.validate(orjson.loads(_event(wire)))
    assert not validator.is_valid(orjson.loads(_event(wire | {"positions": [-1]})))
