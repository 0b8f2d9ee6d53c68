"""Every scenario of tests/detectors runs through the three runners too (issue 41, "parity by construction").

A scenario test here feeds events to a `Monitor` and asserts on its alerts. This fixture records, per Monitor a
test builds, the events it was fed (accepted or refused) and its settings; after the test, the same events go
through the embedded runner, the direct topology and the staged topology in process (tests/parity.py), and the
three must raise the same alert ids. A new scenario test is compared without anyone writing a comparison.

What is not a scenario is left out, and says so in `_why_not`: a Monitor given a public corpus or an `owns` (the
runners load their own), or fed more than `MAX_EVENTS` (the staged pipeline costs about a millisecond per event).
Mark a test `@pytest.mark.no_parity("why")` only for a difference the topologies document (docs/operations.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from parity import run_three

from detectors.monitor import Monitor
from schemas.events import Event
from streams.settings import Settings

MAX_EVENTS = 400


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


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "no_parity(reason): a scenario the three runners judge apart by design")


@pytest.fixture(autouse=True)
def _three_runners_agree(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    if request.node.get_closest_marker("no_parity") is not None:
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
