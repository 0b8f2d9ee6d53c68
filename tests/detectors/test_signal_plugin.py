"""A new signal is one module plus its registration.

A throwaway signal, registered in-process (the registry monkeypatched), runs in every domain and raises
alerts of the kind and precedence its registration declares, with no edit to domain.py, verdict.py or
schemas/alert.py; snapshots taken before it was registered restore with it; and the shared checks of
test_detector_contract.py hold for it as for the built-in detectors.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import test_detector_contract as contract
from factories import TEXTS, request, response, stats

from detectors.domain import DomainMonitor
from detectors.monitor import Monitor
from detectors.settings import DetectionSettings
from detectors.signals import registry
from detectors.signals.base import DomainFacts, Raises, Registration, Stateless
from detectors.verdict import alert_id
from schemas.alert import Alert, Signal
from schemas.exchange import Exchange

OVER = 800_000  # > the pool's 681,280
SIGNAL = "throwaway_error_with_output"


class ErrorWithOutputDetector(Stateless):
    """The throwaway: a server error (5xx) that still delivered output. What the client was told does not
    match what the engine did, so its alerts take the existing kind token_accounting_mismatch."""

    def observe(self, ex: Exchange, domain: DomainFacts) -> list[Signal]:
        resp = ex.response
        if resp is None or resp.status_code < 500 or ex.output_print is None:
            return []
        return [Signal(name=SIGNAL, severity="warning", score=0.5, figures={"status_code": resp.status_code})]


def _summary(f: dict[str, Any]) -> str:
    return f"HTTP {f['status_code']} with output"


def _report(f: dict[str, Any]) -> str:
    return f"The server answered HTTP {f['status_code']} and still delivered output."


def _registration(precedence: int) -> Registration:
    raises = Raises(SIGNAL, kind="token_accounting_mismatch", precedence=precedence, summary=_summary, report=_report)
    return Registration("error_with_output", (raises,), lambda s: ErrorWithOutputDetector())


@pytest.fixture
def register(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """register(precedence): the throwaway appended to the registry, for this test only."""

    def add(precedence: int) -> Registration:
        reg = _registration(precedence)
        monkeypatch.setattr(registry, "EXCHANGE_DETECTORS", (*registry.EXCHANGE_DETECTORS, reg))
        return reg

    yield add


def _run(overlong: bool) -> list[Alert]:
    """A 503 that carried output, with (or without) a prompt the pool cannot hold; overlong counts any status."""
    m = Monitor(DetectionSettings(overlong_max_status=599, overlap_warmup_docs=0, overlap_warmup_s=0))
    events = [
        stats(ts=0, context_window=None),
        request("r1", "acme", 1, tokens=OVER if overlong else 2_000),
        response("r1", "acme", 2, input_tokens=OVER if overlong else 2_000, ttft_ms=None, status=503, text=TEXTS[0]),
    ]
    out: list[Alert] = []
    for e in events:
        out += m.observe(e)
    return out + m.flush()


def test_unregistered_the_signal_does_not_exist() -> None:
    assert _run(overlong=False) == []


def test_registered_it_runs_and_raises_its_declared_kind(register: Any) -> None:
    register(precedence=15)
    (a,) = _run(overlong=False)
    assert (a.kind, a.severity, a.request_ids, a.tenant_id) == ("token_accounting_mismatch", "warning", ["r1"], "acme")
    assert [s.name for s in a.evidence] == [SIGNAL, "cache_pressure"]
    assert a.alert_id == alert_id("token_accounting_mismatch", "d1", ["r1"], None)
    assert Alert.model_validate_json(a.model_dump_json()) == a  # a valid wire alert, nothing new on the wire


@pytest.mark.parametrize(
    ("precedence", "kind"), [(15, "overlong_accepted"), (35, "token_accounting_mismatch")], ids=["below", "above"]
)
def test_its_registered_precedence_decides_against_overlong(register: Any, precedence: int, kind: str) -> None:
    """overlong_accepted has precedence 30: the throwaway's kind wins only when registered above it."""
    register(precedence)
    (a,) = _run(overlong=True)
    assert a.kind == kind
    assert {s.name for s in a.evidence} == {"overlong_accepted", SIGNAL, "cache_pressure"}


def test_a_snapshot_from_before_the_registration_restores_with_it(register: Any) -> None:
    blob = DomainMonitor("d1", contract.SETTINGS).dumps()
    register(precedence=15)
    restored = DomainMonitor.loads(blob)
    assert list(restored.detectors) == [reg.name for reg in registry.registered()]
    assert isinstance(restored.detectors["error_with_output"], ErrorWithOutputDetector)


def test_the_shared_detector_checks_hold_for_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same functions test_detector_contract.py runs over every registered detector."""
    reg = _registration(precedence=15)
    contract.test_the_traffic_exercises_the_detector(reg)
    contract.test_state_stays_within_its_bound(reg)
    contract.test_silent_on_plain_traffic(reg)
    contract.test_no_wall_clock(reg, monkeypatch)
    contract.test_picklable_and_the_copy_carries_on_alike(reg)


def test_its_words_are_declared_with_it(register: Any) -> None:
    """The alert summary and the incident report read the signal's words from its registration: no list of signals
    in detectors/domain.py or streams/report/words.py names it."""
    from streams.report.words import describe

    register(precedence=15)
    (a,) = _run(overlong=True)
    assert "HTTP 503 with output" in a.summary
    assert "prefill capacity 681,280" in a.summary  # overlong_accepted's own words, declared the same way
    (sig,) = [s for s in a.evidence if s.name == SIGNAL]
    words = describe(sig.name, sig.figures, None, name_of=str)
    assert words == "The server answered HTTP 503 and still delivered output."
