"""A domain's time moves one way in every runner (`Back.advance`, issue 41): buffered input released, held findings
judged, incidents resolved before idle domains expire; a Kafka partition records a domain that fails and goes on."""

from __future__ import annotations

import pytest
from factories import request, response

from detectors.monitor import Monitor
from detectors.settings import DetectionSettings
from schemas.alert import IncidentResolved


def _two_buffered_domains() -> Monitor:
    m = Monitor(DetectionSettings(domain_lateness_s=5.0, fingerprint_key="domain-time-tests"))
    for i, domain in enumerate(("d1", "d2")):
        m.observe(request(f"r{i}", "t", 1.0, cache_domain=domain))
        m.observe(response(f"r{i}", "t", 2.0, domain=domain))
    assert all(dm.buffered for dm in m.domains.values())
    # With a lateness a domain's own advance releases its items: no later instant is waited for (Back.settle).
    assert not m.table.waiting
    return m


def test_one_domains_failure_is_recorded_and_the_others_go_on(monkeypatch: pytest.MonkeyPatch) -> None:
    m = _two_buffered_domains()

    def broken(ts: float, complete: bool = False) -> list[object]:
        raise RuntimeError("a bug in one domain")

    monkeypatch.setattr(m.domains["d1"], "advance", broken)
    failed: list[tuple[str, Exception]] = []
    resolved: list[IncidentResolved] = []
    m.back.advance(100.0, resolved, failed)
    assert [(name, str(exc)) for name, exc in failed] == [("d1", "a bug in one domain")]
    assert m.domains["d2"].buffered == 0  # released all the same
    with pytest.raises(RuntimeError):  # without a list to record it in (the embedded runner): it raises
        m.back.advance(200.0)
