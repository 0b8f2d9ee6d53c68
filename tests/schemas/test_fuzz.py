"""Fuzzing replay and the Kafka ingest decode (issue 11, "Done when"): arbitrary bytes and arbitrary
(mostly schema-valid) events never crash anything, and every input line is either processed or
rejected with a reason: lines in = processed + rejected."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schemas.timefmt import MAX_TS
from streams.embedded.runner import EmbeddedRunner
from streams.kafka.ingest import IngestStage
from streams.kafka.inputmsg import InputMessage
from streams.settings import Settings, load_settings

WALL = 1_790_000_000.0  # the wall clock the shells are given: 2026-09-21
# CROSSTALK_FUZZ_EXAMPLES=2000 for a longer hunt than the suite's default.
FUZZ = settings(
    max_examples=int(os.environ.get("CROSSTALK_FUZZ_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)

# --- strategies: the pydantic models' fields, with the edges an attacker would pick ------------------------------

# Mostly valid values (so that the core is exercised), and the edges an attacker would pick.
valid_ints = st.integers(0, 2**53)
huge_ints = st.one_of(valid_ints, valid_ints, valid_ints, st.integers(2**53, 2**70), st.just(int("9" * 400)))
valid_times = st.floats(WALL - 7200, WALL + 600, allow_nan=False)
times = st.one_of(
    valid_times,
    valid_times,
    valid_times,
    st.floats(0, MAX_TS),
    st.sampled_from([1e20, 253402300800, 1e308, -1.0, 0]),
    st.just(int("1" * 400)),
    st.sampled_from(["2026-08-27T10:00:00+02:00", "9999-12-31T23:00:00-12:00", "2026-08-27T10:00:00", "soon"]),
    st.datetimes(timezones=st.timezones()).map(lambda d: d.isoformat()),
)
strong = st.text("0123456789abcdef", min_size=24, max_size=40).map(lambda h: f"CTK-CANARY-{h}")
weak = st.one_of(st.text("0123456789abcdef", max_size=23).map(lambda h: f"CTK-CANARY-{h}"), st.text(max_size=30))
markers = st.one_of(strong, strong, st.just("CTK-CANARY-" + "ab" * 16), weak)
tenants = st.one_of(st.sampled_from(["acme", "probe-a", "probe-b", "t-1"]), st.text(min_size=1, max_size=8))
domains = st.sampled_from(["d1", "d2", "glm53-pd-1"])
vocab = ["the", "cache", "page", "leak", "tenant", "CTK-CANARY-" + "ab" * 16, "é", "中文"]
words = st.lists(st.sampled_from(vocab), max_size=60)
texts = st.one_of(st.none(), words.map(" ".join), st.text(max_size=200))
durations = st.one_of(
    st.none(), st.floats(0, 1e6, allow_nan=False), st.floats(0, 1e13, allow_nan=False), st.just(1e308)
)
ids = st.one_of(st.sampled_from(["r1", "r2", "r3"]), st.text(min_size=1, max_size=6))


def _event(kind: str) -> st.SearchStrategy[dict]:
    base = {"type": st.just(kind), "event_id": st.text(min_size=1, max_size=8), "ts": times}
    per = {
        "request": {"request_id": ids, "tenant_id": tenants, "model": st.just("m"), "prompt_tokens": huge_ints,
                    "cache_domain": st.one_of(st.none(), domains), "context_window": st.one_of(st.none(), huge_ints),
                    "prompt_text": texts, "canaries": st.lists(markers, max_size=1)},
        "response": {"request_id": ids, "tenant_id": tenants, "model": st.just("m"), "cache_domain": domains,
                     "status_code": st.integers(100, 599), "usage": st.fixed_dictionaries(
                         {"input_tokens": huge_ints, "output_tokens": huge_ints}), "ttft_ms": durations,
                     "duration_ms": durations, "output_text": texts},
        "cache_stats": {"cache_domain": domains, "role": st.sampled_from(["prefill", "decode", "unified"]),
                        "capacity_tokens": huge_ints, "used_tokens": huge_ints,
                        "context_window": st.one_of(st.none(), huge_ints)},
        "canary": {"tenant_id": tenants, "marker": markers, "session_id": st.one_of(st.none(), st.text(max_size=4))},
    }[kind]  # fmt: skip
    return st.fixed_dictionaries({**base, **per}).map(lambda d: {k: v for k, v in d.items() if v is not None})


events = st.sampled_from(["request", "response", "cache_stats", "canary"]).flatmap(_event)


def _json(obj: dict) -> bytes:
    return json.dumps(obj, ensure_ascii=False).encode("utf-8", errors="surrogatepass")


event_lines = events.map(_json)
byte_lines = st.binary(max_size=300).map(lambda b: b.replace(b"\n", b" "))
mixed_lines = st.lists(st.one_of(event_lines, event_lines, byte_lines), min_size=1, max_size=40)

# --- replay --------------------------------------------------------------------------------------------------------


def _replay(tmp_path: Path, lines: list[bytes], **sections: dict) -> None:
    src = tmp_path / "fuzz.jsonl"
    src.write_bytes(b"\n".join(lines) + b"\n")
    runner = EmbeddedRunner(load_settings(**sections))
    runner._wall_clock = lambda: WALL
    result = runner.run_files([str(src)])
    assert "internal_error" not in result.rejects and not result.input_errors
    nonblank = sum(1 for line in lines if line.strip())
    assert result.lines_in == nonblank
    assert result.events_total + sum(result.rejects.values()) == nonblank, (result.events, result.rejects)
    for alert in result.alerts:
        json.loads(alert.model_dump_json())  # alerts always serialise (ts formatting included)


@FUZZ
@given(lines=st.lists(byte_lines, min_size=1, max_size=40))
def test_replay_of_arbitrary_bytes(tmp_path: Path, lines: list[bytes]) -> None:
    _replay(tmp_path, lines)


@FUZZ
@given(lines=mixed_lines)
def test_replay_of_arbitrary_events(tmp_path: Path, lines: list[bytes]) -> None:
    _replay(tmp_path, lines, ingest={"max_event_bytes": 4096}, detection={"domain_lateness_s": 2.0})


# --- the Kafka ingest stage's decode (pure: no broker needed to fuzz it) --------------------------------------------


def _ingest(lines: list[bytes], ndjson: bool) -> None:
    counters: Counter[str] = Counter()
    stage = IngestStage(Settings(), counters)
    if ndjson:
        messages = [InputMessage(0, 0, None, b"\n".join(lines), True)]
    else:
        messages = [InputMessage(i % 2, i, None, line, False) for i, line in enumerate(lines)]
    res = stage.read(messages, now=0.0, wall=WALL)
    expected = sum(1 for line in lines if line.strip()) if ndjson else len(lines)
    # Each line is used or dead-lettered; a used one may add a warning (a weak canary marker dropped).
    dead = [d for d in res.dead if d.severity != "warning"]
    assert len(res.event_types) + len(dead) == expected
    assert all(d.reason != "internal_error" for d in res.dead)


@FUZZ
@given(lines=mixed_lines, ndjson=st.booleans())
def test_ingest_decode_of_arbitrary_input(lines: list[bytes], ndjson: bool) -> None:
    _ingest(lines, ndjson)
