"""A Kafka worker's partitions share one session fingerprinting cache, so `session_cache_prints` bounds the process.

Each input partition of the direct topology holds its own Monitor. When each also held its own session cache, a
worker with four partitions held four times the bound: the 30-minute soak's memory rose for ~20 minutes, and more
partitions meant more memory (issue 42). Tested on the worker's own KafkaPipeline (Faust app built, not started)."""

from __future__ import annotations

from pathlib import Path

from streams.kafka import pieces
from streams.kafka.app import KafkaPipeline
from streams.settings import Settings
from tests.factories import TEXTS, request

BOUND = 3_000


def long_prompt(i: int) -> str:
    """A session's prompt, long enough for the cache to keep its state (over `min_cut`)."""
    return " ".join(f"{TEXTS[(i + j) % len(TEXTS)]} turn {i} part {j}." for j in range(12))


def test_every_partition_of_a_worker_uses_the_process_cache_and_its_bound(tmp_path: Path) -> None:
    s = Settings(
        detection={"fingerprint_key": "unit-test-fingerprint-key", "session_cache_prints": BOUND},
        kafka={"data_dir": str(tmp_path), "topology": "direct"},
    )
    pipe = KafkaPipeline(s)
    states = [pipe._state("direct", p) for p in range(4)]
    for n, st in enumerate(states):
        for i in range(40):  # each partition alone could fill the bound
            ev = request(f"r{n}-{i}", f"t{i}", 10.0 + i, text=long_prompt(i), session_id=f"s{n}-{i}")
            st.monitor.observe_evaluated(ev)
    caches = {id(st.monitor.sessions): st.monitor.sessions for st in states}
    held = sum(c.state_size() for c in caches.values())
    assert 0 < held <= BOUND, f"{len(caches)} caches hold {held} fingerprints against a bound of {BOUND}"
    assert pipe.sessions.state_size() == held


def test_a_restored_partition_joins_the_process_cache(tmp_path: Path) -> None:
    s = Settings(
        detection={"fingerprint_key": "unit-test-fingerprint-key"},
        kafka={"data_dir": str(tmp_path), "topology": "direct"},
    )
    pipe = KafkaPipeline(s)
    st = pipe._state("direct", 0)
    st.monitor.observe_evaluated(request("r0", "t0", 10.0, text=long_prompt(0), session_id="s0"))
    blobs = {name: [pieces.whole(name, obj, pipe.counters)] for name, obj in pieces.parts(st)}
    restored = pieces.assemble(blobs, s.detection, pipe.counters, None)
    assert restored.monitor.sessions is not pipe.sessions  # a snapshot holds no cache of its own worth keeping
    pipe.direct_states.pop(0)
    pipe.checkpoints.restore = lambda *a, **k: restored  # type: ignore[method-assign]
    assert pipe._state("direct", 0).monitor.sessions is pipe.sessions
