"""One stream of events through the three runners in process, for comparing their alerts (issue 41).

- embedded: `EmbeddedRunner.run_files` on the lines as one file (re-sorted by event time, flushed at the end);
- direct: `DirectStage` per input partition, each line on the partition the direct keying gives it
  (`routing.domain_key`; canaries on every partition), each partition's Monitor flushed at the end;
- staged: the ingest, join and domain stages wired in memory (`StagePipeline`), each line on the partition
  the staged keying gives it (`routing.routing_key`), one message per ingest batch, then a heartbeat; twice, its
  domain partitions drained first to last and last to first. Each drains a partition's queue to its end before the
  next, so one partition runs ahead of the others and hears their fleet digests after their time (`fleet.late`),
  as a worker does whose partitions stand at different event times: the second order puts the other partitions
  ahead (a late digest's mix-up check was found wrong in one order only, ADR 0017 stop 66).

A stream never ends in Kafka, so `with_ticks` appends what tests/kafka/test_stages.py appends: idle cache stats
an hour of event time past the last event on every partition, which move every watermark past the stream. The
same lines (ticks included) go to all three runners.

`three_runners_agree`, an autouse fixture (tests/conftest.py imports it), runs every scenario of tests/detectors
through the three runners too ("parity by construction"): a scenario test there feeds events to a `Monitor` and
asserts on its alerts; the fixture records, per Monitor a test builds, the events it was fed (accepted or refused)
and its settings, and after the test the same events go through the three runners, which must raise the same alert
ids. A new scenario test is compared without anyone writing a comparison. Left out, as `_why_not` says: a Monitor
given a public corpus or an `owns` (the runners load their own), or fed more than `MAX_EVENTS` (the staged pipeline
costs about a millisecond per event). A fixture here, not in a tests/detectors/conftest.py: a second module named
`conftest` would shadow tests/conftest.py for the tests that import from it.
"""

from __future__ import annotations

import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

import orjson
import pytest

from detectors.monitor import Monitor
from detectors.public import PublicSet
from schemas.events import Event, parse_event
from streams.embedded.runner import EmbeddedRunner
from streams.inputs.corpus import load_public
from streams.kafka import fleet
from streams.kafka.direct import DirectStage, DirectState
from streams.kafka.inputmsg import InputMessage
from streams.routing import domain_key, input_partition_of
from streams.settings import Settings
from tests.support.rawevents import key_of, tick_events
from tests.support.stagepipe import StagePipeline


@dataclass
class Parity:
    """Each runner's alert ids (and the alerts' kinds, to read a difference by)."""

    ids: dict[str, set[str]] = field(default_factory=dict)
    kinds: dict[str, dict[str, str]] = field(default_factory=dict)

    def add(self, runner: str, alerts: list[object]) -> None:
        self.ids[runner] = {a.alert_id for a in alerts}  # type: ignore[attr-defined]
        self.kinds[runner] = {a.alert_id: f"{a.kind}:{','.join(a.request_ids)}" for a in alerts}  # type: ignore[attr-defined]

    def differences(self) -> dict[str, list[str]]:
        """Per runner, the alerts it raised that another did not (empty when all agree)."""
        every = set().union(*self.ids.values())
        out: dict[str, list[str]] = {}
        for runner, ids in self.ids.items():
            missing = every - ids
            if missing:
                seen = {k: v for kinds in self.kinds.values() for k, v in kinds.items()}
                out[f"{runner} lacks"] = sorted(seen[i] for i in missing)
        return out


def with_ticks(lines: list[bytes], settings: Settings) -> list[bytes]:
    # Past the newest event the runners take: one from the future is refused by each of them (future_ts).
    now = time.time()
    last = max((ts for ts in (orjson.loads(line)["ts"] for line in lines) if ts <= now), default=0.0)
    return lines + [orjson.dumps(t) for t in tick_events(last, settings.kafka)]


def embedded(settings: Settings, lines: list[bytes]) -> list[object]:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "events.jsonl"
        path.write_bytes(b"\n".join(lines) + b"\n")
        return list(EmbeddedRunner(settings).run_files([str(path)]).alerts)


def direct(settings: Settings, lines: list[bytes]) -> list[object]:
    n = settings.kafka.input_partitions
    events = [parse_event(line) for line in lines]
    domain_of = {e.request_id: e.cache_domain for e in events if e.type == "response"}
    parts = range(n)
    counters: Counter[str] = Counter()
    stage = DirectStage(settings, counters)
    alerts: list[object] = []
    public = _public_once(settings)  # as the worker gives it (streams/kafka/app.py)
    states = {q: DirectState.fresh_direct(settings.detection, counters, public) for q in parts}
    for st in states.values():
        fleet.listen(st)
    # The partitions read side by side, a line at a time in the stream's order (as concurrent consumers would), each
    # telling the others what it judged (the fleet topic without its lag: streams/kafka/fleet.py).
    offsets = dict.fromkeys(parts, -1)
    for line, ev in zip(lines, events, strict=True):
        key = domain_key(ev, domain_of) or getattr(ev, "request_id", None)
        for q in range(n) if ev.type == "canary" or key is None else [input_partition_of(key.encode(), n)]:
            offsets[q] += 1
            msg = InputMessage(q, offsets[q], None, line, False, placed=True)
            alerts += stage.read(states[q], q, [msg], time.time()).alerts
            fleet.deliver(q, fleet.told(states[q]), states, counters)
    for st in states.values():
        alerts += st.monitor.flush()
    return alerts


def staged(settings: Settings, lines: list[bytes], last_first: bool = False) -> list[object]:
    pipe = StagePipeline(settings, last_first=last_first)
    n = settings.kafka.input_partitions
    for line in lines:
        pipe.feed([(input_partition_of(key_of(orjson.loads(line)), n), line)])
    pipe.heartbeat()
    return list(pipe.out.alerts)


_PUBLIC: dict[tuple[object, ...], PublicSet | None] = {}


def _public_once(settings: Settings) -> PublicSet | None:
    """`load_public`, once per key and corpus: the built-in licences cost most of a small scenario's run (each
    runner loads them), and a corpus is only read once loaded."""
    d = settings.detection
    key = (d.fingerprint_key.get_secret_value(), d.k, d.w, settings.corpus.path, settings.corpus.licences)
    if key not in _PUBLIC:
        _PUBLIC[key] = load_public(settings)
    return _PUBLIC[key]


def run_three(settings: Settings, lines: list[bytes]) -> Parity:
    """The alerts of the three runners on `lines` (ticks appended)."""
    lines = with_ticks(lines, settings)
    out = Parity()
    with (
        mock.patch("streams.embedded.runner.load_public", _public_once),
        mock.patch("tests.support.stagepipe.load_public", _public_once),
    ):
        out.add("embedded", embedded(settings, lines))
        out.add("direct", direct(settings, lines))
        out.add("staged", staged(settings, lines))
        out.add("staged, last partition first", staged(settings, lines, last_first=True))
    return out


MAX_EVENTS = 400
SCENARIOS = Path(__file__).resolve().parent / "detectors"


class _Recorder:
    def __init__(self) -> None:
        self.fed: dict[int, tuple[Monitor, list[Event]]] = {}

    def wrap(self, original: Any) -> Any:
        recorder = self

        def observe(monitor: Monitor, event: Event, *args: Any, **kwargs: Any) -> Any:
            entry = recorder.fed.setdefault(id(monitor), (monitor, []))
            entry[1].append(event)
            return original(monitor, event, *args, **kwargs)

        return observe


def _why_not(monitor: Monitor, events: list[Event]) -> str | None:
    if monitor.table.public is not None:
        return "a public corpus"
    if monitor.owns is not None:
        return "owns a share of the domains"
    if len(events) > MAX_EVENTS:
        return f"{len(events)} events"
    return None


@pytest.fixture(autouse=True)
def three_runners_agree(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    if SCENARIOS not in Path(str(request.path)).parents:
        yield
        return
    recorder = _Recorder()
    # `observe` is an alias of `_observe` (one call level less per event): both are wrapped; observe_evaluated
    # calls `_observe`, so each event is recorded once.
    monkeypatch.setattr(Monitor, "_observe", recorder.wrap(Monitor._observe))
    monkeypatch.setattr(Monitor, "observe", recorder.wrap(Monitor.observe))
    yield
    monkeypatch.undo()
    for monitor, events in recorder.fed.values():
        if _why_not(monitor, events) is not None:
            continue
        settings = Settings(detection=monitor.settings)
        lines = [e.model_dump_json(exclude_none=True).encode() for e in events]
        got = run_three(settings, lines)
        assert not got.differences(), f"the runners disagree on this test's {len(events)} events: {got.differences()}"
