"""The fleet topic's messages and their delivery (streams/kafka/fleet.py), without a broker; the broker's part is
tests/broker/test_kafka_fleet.py, and every scenario of tests/detectors runs through the in-memory topologies with
this delivery (tests/parity.py)."""

from __future__ import annotations

from collections import Counter

import pytest

from detectors.pipeline import DetectionSettings, Digest
from streams.kafka import fleet
from streams.kafka.stages import DomainState

S = DetectionSettings(fingerprint_key="fleet-feed-test")
D = [
    Digest(1.5, "req-1", "t\x1fs", b"\x01" * 16, b"\x02" * 8, "pool-a", 1.0, 200, "chatcmpl-ä1"),
    Digest(2.0, "req-ü", "u\x1fr", b"", b"\x03" * 24, "pool-ü", 0.5, 503),
    # With identifiers (ADR 0027): known and some, known and none.
    Digest(2.5, "req-3", "v\x1fq", b"\x04" * 8, b"\x05" * 8, "pool-a", 2.0, 200, "", b"\x06" * 16, b""),
    # With the prompt's two counts (ADR 0029).
    Digest(3.0, "req-4", "w\x1fp", b"\x07" * 8, b"", "pool-b", 2.9, 200, "", None, None, (733, 412)),
    # A request whose answer was lost, with its prompt's count (ADR 0031).
    Digest(3.5, "req-5", "x\x1fo", b"\x08" * 8, b"", "pool-b", 3.0, 499, "", None, None, None, 412),
]


def test_a_message_carries_its_digests_whole() -> None:
    assert fleet.decode(fleet.encode(D)) == D
    assert fleet.decode(fleet.encode([])) == []


def test_a_message_of_a_worker_from_before_decodes_without_where_it_was_delivered() -> None:
    # F1: no request time, status or cache domain (a rolling upgrade): the record learns it, the mix-ups pass it by.
    head = fleet._HEAD.pack(1.5, 5, 3, 16, 8)
    old = b"F1" + head + b"req-1" + b"t\x1fs" + b"\x01" * 16 + b"\x02" * 8
    assert fleet.decode(old) == [Digest(1.5, "req-1", "t\x1fs", b"\x01" * 16, b"\x02" * 8)]


def test_a_message_of_a_worker_from_before_decodes_without_the_response_id() -> None:
    # F2: where and when it was delivered, no response id: the one-id-twice check passes it by.
    head = fleet._HEAD.pack(1.5, 5, 3, 16, 8) + fleet._WHERE.pack(1.0, 200, 6)
    old = b"F2" + head + b"req-1" + b"t\x1fs" + b"pool-a" + b"\x01" * 16 + b"\x02" * 8
    assert fleet.decode(old) == [Digest(1.5, "req-1", "t\x1fs", b"\x01" * 16, b"\x02" * 8, "pool-a", 1.0, 200)]


def test_a_message_of_a_worker_from_before_decodes_without_the_identifiers() -> None:
    # F3: the response id, no identifiers: unknown (None), so the identifier check passes it by.
    head = fleet._HEAD.pack(1.5, 5, 3, 16, 8) + fleet._WHERE.pack(1.0, 200, 6) + fleet._RESPONSE.pack(2)
    old = b"F3" + head + b"req-1" + b"t\x1fs" + b"pool-a" + b"id" + b"\x01" * 16 + b"\x02" * 8
    (d,) = fleet.decode(old)
    assert d == Digest(1.5, "req-1", "t\x1fs", b"\x01" * 16, b"\x02" * 8, "pool-a", 1.0, 200, "id")
    assert d.prompt_ids is None and d.output_ids is None


def test_a_message_of_a_worker_from_before_decodes_without_the_counts() -> None:
    # F4: identifiers, no counts: unknown (None), so the counts' check passes it by.
    head = fleet._HEAD.pack(1.5, 5, 3, 16, 8) + fleet._WHERE.pack(1.0, 200, 6) + fleet._RESPONSE.pack(0)
    old = b"F4" + head + fleet._IDS.pack(8, fleet._NONE) + b"req-1t\x1fspool-a" + b"\x01" * 24 + b"\x02" * 8
    (d,) = fleet.decode(old)
    assert d.prompt_ids == b"\x02" * 8 and d.output_ids is None and d.counts is None


def test_counts_past_what_a_frame_holds_go_as_unknown() -> None:
    # A hostile or broken count (negative, past uint32) is not sent as some other number: it is unknown.
    for counts in ((-1, 5), (5, 2**40), (2**32 - 1, 3)):
        (d,) = fleet.decode(fleet.encode([Digest(1.0, "r", "k", b"", b"\x01" * 8, "p", 1.0, 200, counts=counts)]))
        assert d.counts is None
    (d,) = fleet.decode(fleet.encode([Digest(1.0, "r", "k", b"", b"\x01" * 8, "p", 1.0, 200, counts=(0, 2**32 - 2))]))
    assert d.counts == (0, 2**32 - 2)
    for asked in (-1, 2**32 - 1, 2**40):  # a lost answer's count, likewise
        (d,) = fleet.decode(fleet.encode([Digest(1.0, "r", "k", b"\x01" * 8, b"", "p", 1.0, 499, asked=asked)]))
        assert d.asked is None and d.counts is None


def test_a_lost_answers_count_is_read_only_where_the_answer_was_lost() -> None:
    # The gateway's count alone, on a 2xx response (a frame written otherwise), is unknown counts, not a lost answer.
    head = fleet._HEAD.pack(1.5, 1, 1, 8, 0) + fleet._WHERE.pack(1.0, 200, 1) + fleet._RESPONSE.pack(0)
    frame = b"F5" + head + fleet._IDS.pack(fleet._NONE, fleet._NONE) + fleet._COUNTS.pack(412, fleet._UNCOUNTED)
    (d,) = fleet.decode(frame + b"rkp" + b"\x01" * 8)
    assert d.asked is None and d.counts is None
    (d,) = fleet.decode(
        frame.replace(fleet._WHERE.pack(1.0, 200, 1), fleet._WHERE.pack(1.0, 504, 1)) + b"rkp" + b"\x01" * 8
    )
    assert d.asked == 412 and d.counts is None


NAN = fleet.encode([Digest(float("nan"), "r", "k", b"", b"\x01" * 8)])


@pytest.mark.parametrize("blob", [b"", b"{}", b"F1\x00", fleet.encode(D)[:-3], b"F9" + fleet.encode(D)[2:], NAN])
def test_a_message_not_ours_is_refused_with_a_reason(blob: bytes) -> None:
    with pytest.raises(fleet.FleetFrameError):
        fleet.decode(blob)


def test_the_reader_counts_what_it_cannot_use_and_goes_on() -> None:
    counters: Counter[str] = Counter()
    got: list[tuple[int, list[Digest]]] = []
    reader = fleet.FleetReader("127.0.0.1:1", "t", 1, 0.0, lambda o, d: got.append((o, d)), counters)
    reader._one(b"3", b"garbage")
    reader._one(b"not-a-partition", fleet.encode(D))
    reader._one(b"3", fleet.encode(D))
    assert counters["fleet.malformed"] == 2 and got == [(3, D)]


def test_digests_go_to_every_partition_but_the_one_that_told_them() -> None:
    counters: Counter[str] = Counter()
    states = {p: DomainState.fresh(S, counters) for p in range(3)}
    for st in states.values():
        fleet.listen(st)
    fleet.deliver(1, D, states, counters)
    assert [states[p].table.fleet.pending for p in range(3)] == [len(D), 0, len(D)]
    assert counters["fleet.heard"] == 2 * len(D)


def test_messages_stay_under_the_limit_and_an_oversized_digest_loses_its_prompt_only() -> None:
    big = Digest(3.0, "req-big", "t\x1fs", b"\x05" * 4000, b"\x06" * 80, "pool-a", 2.5, 200)
    messages, cut = fleet.split([*D, big, *D], 300)
    assert cut == 1 and all(len(m) <= 300 for m in messages) and len(messages) >= 2
    got = [d for m in messages for d in fleet.decode(m)]
    assert got == [*D, Digest(3.0, "req-big", "t\x1fs", b"", b"\x06" * 80, "pool-a", 2.5, 200), *D]
